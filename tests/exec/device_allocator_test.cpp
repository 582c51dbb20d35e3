// The executor's allocator: the simulator's caching-allocator policy over real segments. Real
// memory follows the policy's segments exactly (reserved, released to make room, refused by the
// device), blocks never overlap, and a host run of a scenario reports the simulator's peaks.
#include "shardscope/exec/device_allocator.hpp"

#include <gtest/gtest.h>

#include <map>

#include "shardscope/exec/host_job.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope::exec {
namespace {

// Segments from the host heap, counted, with an optional limit on what the "device" gives.
class CountingMemory final : public SegmentMemory {
 public:
  explicit CountingMemory(Bytes device_limit = 1LL << 50) : limit_(device_limit) {}
  std::byte* reserve(Bytes bytes) override {
    if (held_ + bytes > limit_) return nullptr;
    held_ += bytes;
    return space_.reserve(bytes);
  }
  void release(std::byte*, Bytes bytes) noexcept override { held_ -= bytes; }
  std::byte* reserve_address(Bytes bytes) override { return space_.reserve(bytes); }
  bool map(std::byte*, Bytes bytes) override {
    if (held_ + bytes > limit_) return false;
    held_ += bytes;
    return true;
  }
  void unmap(std::byte*, Bytes bytes) noexcept override { held_ -= bytes; }
  void release_address(std::byte*, Bytes) noexcept override {}
  Bytes held() const { return held_; }

 private:
  AddressSpaceMemory space_;
  Bytes limit_;
  Bytes held_ = 0;
};

TEST(DeviceAllocator, RealSegmentsFollowThePolicyThroughReleaseAndRetry) {
  CountingMemory memory;
  DeviceAllocator a(memory, 64 * kMiB);
  // Two 30 MiB buffers: a 30 MiB segment each (large requests round up to 2 MiB).
  a.allocate(0, 30 * kMiB, 0);
  a.allocate(1, 30 * kMiB, 0);
  EXPECT_EQ(memory.held(), a.reserved());
  EXPECT_EQ(a.reserved(), 60 * kMiB);
  a.free(0);
  a.free(1);
  EXPECT_EQ(memory.held(), 60 * kMiB);  // cached, as PyTorch keeps them
  // 40 MiB does not fit beside the cache: the policy releases both cached segments (a retry) and
  // the real ones are given back before the new one is reserved.
  a.allocate(2, 40 * kMiB, 0);
  EXPECT_EQ(a.retries(), 1);
  EXPECT_EQ(memory.held(), 40 * kMiB);
  EXPECT_EQ(a.events(),
            (std::vector<SegmentEvent>{
                {0, 30 * kMiB}, {1, 30 * kMiB}, {0, -30 * kMiB}, {1, -30 * kMiB}, {2, 40 * kMiB}}));
}

TEST(DeviceAllocator, LiveBlocksNeverOverlapAndReuseCachedSpace) {
  CountingMemory memory;
  DeviceAllocator a(memory, 1LL << 40);
  std::map<BufferId, std::pair<std::byte*, Bytes>> live;
  std::uint64_t x = 12345;
  for (BufferId id = 0; id < 2000; ++id) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // a fixed pseudo-random walk
    const Bytes size = static_cast<Bytes>((x >> 33) % (24 * kMiB)) + 1;
    live[id] = {a.allocate(id, size, static_cast<StreamId>((x >> 20) % 3)), size};
    if ((x >> 40) % 3 != 0 && !live.empty()) {  // free an older one about two times in three
      const auto victim = live.begin();
      a.free(victim->first);
      live.erase(victim);
    }
    ASSERT_EQ(memory.held(), a.reserved());
  }
  std::vector<std::pair<std::byte*, Bytes>> spans;
  spans.reserve(live.size());
  for (const auto& [id, span] : live) spans.push_back(span);
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    EXPECT_LE(spans[i - 1].first + spans[i - 1].second, spans[i].first);
}

TEST(DeviceAllocator, ADeviceThatRefusesASegmentIsAnOutOfMemoryThatSaysSo) {
  CountingMemory memory(30 * kMiB);  // the device has less than the policy's capacity
  DeviceAllocator a(memory, 80 * kMiB);
  a.allocate(0, 20 * kMiB, 0);
  try {
    a.allocate(1, 20 * kMiB, 0);
    FAIL();
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.buffer, 1);
    EXPECT_EQ(e.requested, 20 * kMiB);
    EXPECT_NE(std::string(e.what()).find("the device refused a new segment"), std::string::npos);
  }
  DeviceAllocator b(memory, 30 * kMiB);  // now the policy itself runs out
  EXPECT_THROW(b.allocate(0, 40 * kMiB, 0), OutOfMemory);
}

TEST(DeviceAllocator, ExpandableSegmentsMapThePagesThePolicyMaps) {
  CountingMemory memory;
  DeviceAllocator a(memory, 16 * kMiB, AllocatorParams{true});
  // 3 MiB maps two 2 MiB pages of the stream's one segment; 5 MiB after it grows the segment and
  // maps what it needs beyond the 1 MiB left on the second page.
  std::byte* first = a.allocate(0, 3 * kMiB, 0);
  std::byte* second = a.allocate(1, 5 * kMiB, 0);
  EXPECT_EQ(a.reserved(), memory.held());
  EXPECT_EQ(second - first, 4 * kMiB);  // both in one address range, page-aligned growth
  a.free(0);
  a.free(1);
  EXPECT_EQ(memory.held(), a.reserved());  // freed pages stay mapped (cached)
  // 14 MiB does not fit beside the 10 MiB cached: the policy unmaps free pages and maps again.
  a.allocate(2, 14 * kMiB, 0);
  EXPECT_EQ(a.retries(), 1);
  EXPECT_EQ(memory.held(), a.reserved());
  EXPECT_EQ(a.reserved(), 14 * kMiB);
  Bytes mapped = 0;
  for (const auto& e : a.events()) mapped += e.bytes;
  EXPECT_EQ(mapped, memory.held());
}

// Under memory pressure, with partial pages at free blocks' ends, the pages the device holds are
// always the policy's reserved bytes.
TEST(DeviceAllocator, ExpandableSegmentsFollowThePolicyUnderPressure) {
  CountingMemory memory;
  DeviceAllocator a(memory, 96 * kMiB, AllocatorParams{true});
  std::map<BufferId, Bytes> live;
  std::uint64_t x = 777;
  int refused = 0;
  for (BufferId id = 0; id < 3000; ++id) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const Bytes size = static_cast<Bytes>((x >> 33) % (9 * kMiB)) + 1;
    try {
      a.allocate(id, size, static_cast<StreamId>((x >> 20) % 2));
      live[id] = size;
    } catch (const OutOfMemory&) {
      ++refused;
    }
    while (!live.empty() && (live.size() > 12 || (x >> 40) % 3 == 0)) {
      a.free(live.begin()->first);
      live.erase(live.begin());
      x >>= 1;
    }
    ASSERT_EQ(memory.held(), a.reserved()) << "after buffer " << id;
  }
  // Both paths ran: pages unmapped to make room, and requests the policy refused (13 live
  // buffers of up to 9 MiB can exceed 96 MiB), after which the mirror still matched.
  EXPECT_GT(a.retries(), 0);
  EXPECT_GT(refused, 0);
}

TEST(DeviceAllocator, AnExpandableSegmentTheDeviceCannotMapIsAnOutOfMemory) {
  CountingMemory memory(8 * kMiB);
  DeviceAllocator a(memory, 64 * kMiB, AllocatorParams{true});
  a.allocate(0, 6 * kMiB, 0);
  EXPECT_THROW(a.allocate(1, 6 * kMiB, 0), OutOfMemory);
  EXPECT_EQ(memory.held(), 6 * kMiB);
}

// One allocator policy, two users: the host executor, placing every buffer through
// DeviceAllocator, reports the simulator's allocated and reserved peaks, at the same ops, with
// classic and with expandable segments.
TEST(DeviceAllocator, AHostRunReportsTheSimulatorsPeaks) {
  for (const bool expandable : {false, true}) {
    SCOPED_TRACE(expandable ? "expandable segments" : "classic segments");
    const auto p = sim::simulate_scenario(load_scenario(
        std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml",
        {"model.layers=2", "training.seq_len=256", "training.iterations=1",
         "cluster.gpus_per_node=2", "cluster.gpu.memory=24GiB",
         std::string("allocator.expandable_segments=") + (expandable ? "true" : "false")}));
    HostJobOptions o;
    o.backend.cost = [](OpId, const Op&) { return HostCost{1000, 0}; };  // 1 µs each: order only
    o.backend.memory_capacity = p.timeline().memory_capacity;
    o.backend.allocator = p.scenario.allocator;
    o.run.memory_capacity = p.timeline().memory_capacity;
    const auto result = run_host_threads(p.schedule, o);
    const MemoryPeaks& sim = p.timeline().peaks;
    const MemoryPeaks& run = result.timeline.peaks;
    EXPECT_GT(sim.reserved.bytes, sim.allocated.bytes);  // the cache holds something
    EXPECT_EQ(run.allocated.bytes, sim.allocated.bytes);
    EXPECT_EQ(run.reserved.bytes, sim.reserved.bytes);
    EXPECT_EQ(run.allocated.op, sim.allocated.op);
    EXPECT_EQ(run.reserved.op, sim.reserved.op);
    EXPECT_EQ(run.allocated.by_category, sim.allocated.by_category);
    EXPECT_EQ(run.allocated_by_phase, sim.allocated_by_phase);
  }
}

}  // namespace
}  // namespace shardscope::exec
