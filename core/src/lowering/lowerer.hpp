#pragma once
// What FSDP1 and FSDP2 lowering share: the module walk (root pre-forward, children, root
// post-forward, and back), compute ops with their activation buffers, persistent buffers, the
// optimizer step, zero_grad and state-dict checkpoints. The API-specific lowerers fill in the
// hooks.

#include <vector>

#include "schedule_builder.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/param_groups.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope::lowering {

class Lowerer {
 public:
  explicit Lowerer(const Scenario& scenario);
  virtual ~Lowerer() = default;
  Lowerer(const Lowerer&) = delete;
  Lowerer& operator=(const Lowerer&) = delete;

  Schedule run();

 protected:
  // ---- hooks the API implements (g: index into layouts_)
  virtual void setup_streams_and_comms() = 0;
  virtual void root_pre_forward() = 0;
  virtual void pre_forward(int g) = 0;
  virtual void post_forward(int g) = 0;
  virtual void pre_backward(int g) = 0;
  virtual void post_backward(int g) = 0;
  virtual void finalize_backward() = 0;
  virtual void after_optimizer_step(OpId /*step*/) {}
  /// After each call of the registered generation method (training.generation).
  virtual void after_generation_call() {}
  /// The unsharded parameters compute reads, or kNone.
  virtual BufferId unsharded_params(int g) const = 0;
  /// Lets the API allocate (or reuse) the unsharded gradient a backward op writes: part `p` of
  /// group `g` makes the gradients of `param_numel` parameters (all the group's when -1).
  virtual void on_backward_op(int /*g*/, std::size_t /*p*/, std::int64_t /*param_numel*/,
                              Op& /*op*/) {}
  /// The group after whose backward compute `g`'s post-backward hook runs: `g` itself unless the
  /// API says autograd reaches the hook later (FSDP1 with forward prefetch, see its lowerer).
  virtual int post_backward_after(int g) const { return g; }
  /// Whether the root's after_root parts (the loss) run inside the root's forward instead, before
  /// its post-forward hook, and so their backward after its pre-backward hook (FSDP1's chunked
  /// loss, see its lowerer).
  virtual bool loss_inside_root_forward() const { return false; }
  /// Whether gradients are reduced on the current micro-batch.
  bool sync_gradients() const;
  bool last_microbatch() const { return b_.microbatch() + 1 == s_.training.grad_accum; }
  /// Whether the ops issued now run a forward: the training forward or generation's.
  bool forward_phase() const {
    return b_.phase() == Phase::forward || b_.phase() == Phase::generation;
  }
  bool generating() const { return b_.phase() == Phase::generation; }

  // ---- shared pieces
  bool has_params(int g) const { return layouts_[static_cast<std::size_t>(g)].numel > 0; }
  bool is_root(int g) const { return g == root_; }
  GroupId gid(int g) const { return ids_[static_cast<std::size_t>(g)]; }
  const GroupLayout& layout(int g) const { return layouts_[static_cast<std::size_t>(g)]; }
  /// "<group>/<what>@i<iteration>m<microbatch>" at the current step.
  BufferName buffer_name(std::string_view what) { return b_.step_name(b_.label(what)); }
  Bytes elems(std::int64_t numel, DType dtype) const { return numel * bytes_per_element(dtype); }
  int world() const { return static_cast<int>(s_.fsdp.mesh_shard); }
  /// NVLink domains `ranks` consecutive ranks span (nodes, unless cluster.nvlink.domain joins
  /// several): what Communicator::nodes holds.
  int domains_spanned(int ranks) const;

  /// Forward compute of one part; allocates its saved activations.
  void forward_part(int g, std::size_t part);
  /// Whether a root part runs after the children inside the root's forward: an after_children
  /// part, or an after_root one when the API runs the loss inside the model.
  bool in_root_forward_tail(const ComputePart& part) const {
    return part.position == ComputePosition::after_children ||
           (part.position == ComputePosition::after_root && loss_inside_root_forward());
  }
  /// Recompute (if checkpointed) and backward of one part; frees its activations.
  void backward_part(int g, std::size_t part);
  /// A zero-work op: `stream` waits for `event` (PyTorch's wait_event / wait_stream); it may carry
  /// frees the wait makes safe. Nothing is emitted for a missing event.
  OpId stream_wait(StreamId stream, OpId event, IdList frees = {}, std::string_view label = {});
  /// Frees what the previous part's op handed on (or keeps it as the gradient it becomes, or
  /// hands it on further: ComputePart) and hands on `output` bytes from `op` to the next part.
  enum class Input { free, keep, pass_on };
  void hand_on(int g, std::size_t p, Bytes output, BufferCategory category, Input input, Op& op);
  /// A dtype cast of what the previous op handed on (a compute op of group `g`: forward in the
  /// forward phase, backward in backward): reads it, frees it, and hands on its copy in `to`.
  /// Nothing is emitted when nothing was handed on.
  void cast_handed_on(int g, DType from, DType to, std::string_view label);
  /// The sharded gradient of `g`, allocated on first use in an iteration.
  BufferId sharded_grad(int g, Op& op);
  /// The cuBLAS workspace of the thread that runs `op` (forward: the Python thread; backward and
  /// recompute: autograd's device thread), allocated by its first GEMM and held for good.
  void add_cublas_workspace(Op& op);
  /// Transient tensors allocated and freed by one op.
  void add_workspace(int g, const std::vector<std::int32_t>& labels, const WorkspaceSizes& tensors,
                     Op& op);

  /// Buffer-name labels of a compute part, made once per distinct part label ("block", "embed").
  struct PartLabels {
    std::string part;
    std::int32_t saved = kNone, recomputed = kNone, weight_casts = kNone, output = kNone,
                 grad_input = kNone;
    std::vector<std::int32_t> forward_workspace,
        backward_workspace;                        // "<part>.<pass>_workspace.<i>"
    std::vector<std::int32_t> recomputed_tensors;  // "<part>.recomputed.<i>"
  };
  const PartLabels& part_labels(int g, std::size_t part);
  std::vector<PartLabels> part_labels_;
  std::vector<std::size_t>
      part_first_;  // [group] → where the group's parts start in per-part tables
  /// Part `p` of group `g` in the per-part tables (part_label_index_, saved_).
  std::size_t part_slot(int g, std::size_t p) const {
    return part_first_[static_cast<std::size_t>(g)] + p;
  }
  std::vector<int>
      part_label_index_;  // [part_slot(group, part)] → part_labels_ index, -1 until asked

  const Scenario& s_;
  ScheduleBuilder b_;
  std::vector<GroupLayout> layouts_;
  ModelCompute compute_;
  std::vector<GroupId> ids_;
  int root_ = 0;
  std::vector<int> outside_;   // custom groups listed before root (run outside every FSDP module)
  std::vector<int> children_;  // groups after root, forward order
  std::vector<int> post_forward_order_;  // FSDP groups with params, in post-forward order

  DType orig_dtype_ = DType::fp32;
  DType param_dtype_ = DType::fp32;
  DType reduce_dtype_ = DType::fp32;
  DType grad_dtype_ = DType::fp32;  // the sharded gradients the optimizer reads
  bool offload_ = false;
  StreamId cpu_ = 0;
  StreamId compute_stream_ = 0;

  std::vector<BufferId> sharded_params_;  // per group, live at start (host under offload)
  std::vector<BufferId> sharded_grads_;   // per group, this iteration (kNone until reduced)
  std::vector<BufferId> saved_;  // [part_slot(group, part)] saved activations of this micro-batch
  std::vector<BufferId> optimizer_states_;  // allocated lazily by the first step
  std::vector<BufferId> autocast_cache_;    // weight casts held until the forward ends (FSDP2)
  IdList handed_on_;                 // what a part's op hands to the next part's op (ComputePart)
  BufferId kept_input_ = kNone;      // a forward input kept as the gradient it becomes
  BufferId cublas_forward_ = kNone;  // the cuBLAS workspace of each thread running GEMMs
  BufferId cublas_backward_ = kNone;

 private:
  void forward_pass();
  /// One call of the registered generation method: a prefill and a decode per further token,
  /// each a full forward through the FSDP hooks, no_grad (nothing saved), a KV cache per block.
  void generation_call();
  /// A generation forward's op for group `g` running `kernels`; it reads and frees what the
  /// previous op handed on and hands on `output` bytes (none when 0).
  Op& generation_op(int g, const KernelSet& kernels, std::string_view label, Bytes output,
                    BufferCategory category);
  void backward_pass();
  void optimizer_step();
  void checkpoint_state_dict();
  void synchronize_device(std::string_view label);
  /// Frees the weight casts autocast's cache held, on the forward's last op.
  void clear_autocast_cache();
  void plan_groups();
};

}  // namespace shardscope::lowering
