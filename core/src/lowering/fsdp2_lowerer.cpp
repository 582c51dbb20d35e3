// FSDP2 (fully_shard) lowering. Follows torch/distributed/fsdp/_fully_shard/:
//   _fsdp_state.py        FSDPState._root_pre_forward, _pre_forward, _pre_backward,
//                         _root_post_backward_final_callback
//   _fsdp_param_group.py  FSDPParamGroup.unshard, wait_for_unshard, reshard, pre_backward,
//                         _backward_prefetch, post_backward, finalize_backward
//   _fsdp_collectives.py  foreach_all_gather (copy-in stream, then all-gather stream),
//                         foreach_all_gather_copy_out, foreach_reduce
// docs/semantics.md walks through what each emitted op stands for.
#include <fmt/format.h>

#include "fsdp_lowerers.hpp"

namespace shardscope::lowering {
namespace {

class Fsdp2Lowerer final : public Lowerer {
 public:
  using Lowerer::Lowerer;

 private:
  enum class Sharded { sharded, sharded_post_forward, unsharded };
  struct GroupState {
    Sharded state = Sharded::sharded;
    BufferId ag_output = kNone;  // pending _all_gather_result
    OpId ag_op = kNone;
    BufferId unsharded = kNone;
    BufferId post_forward_shard = kNone;
    OpId reshard_event = kNone;  // _reshard_after_forward_event (reshard to a smaller mesh)
    // Unsharded gradients (param dtype) since the last reduction, one per compute part that
    // makes any (FSDP2's parameters keep their own .grad: the root's output head's exists from
    // the head's backward, its embedding's from the lookup's).
    SmallVector<BufferId, 4> grads;
    BufferId accumulated =
        kNone;  // unsharded_accumulated_grad (reduce dtype) across no-sync micro-batches
    BufferId partial_reduce = kNone;  // HSDP: reduce-scatter output kept when not all-reducing
    OpId post_reduce = kNone;
    OpId grad_offload = kNone;
    bool async_op = false;           // the pending all-gather came from unshard(async_op=True)
    BufferId persistent_ag = kNone;  // fsdp.all_gather_buffer: persistent
  };

  bool persistent_all_gather() const {
    return s_.fsdp.all_gather_buffer == AllGatherBuffer::persistent;
  }
  /// fsdp.comm_buffer_pool: process_group. FSDP's communication buffers come from
  /// ProcessGroupAllocMixin.allocate: the process group's pool where the GPU supports multicast
  /// (ProcessGroupNCCL::supportsTensorAlloc), otherwise torch.empty, the caching allocator.
  BufferId comm_buffer(BufferId b) {
    if (s_.fsdp.comm_buffer_pool == CommBufferPool::process_group && s_.cluster.gpu.multicast)
      b_.schedule().buffers[static_cast<std::size_t>(b)].pool = MemoryPool::process_group;
    return b;
  }

  /// What dropping FSDP's reference to all-gather output `b` frees: nothing when the custom
  /// AllGather keeps it, or when there is none.
  IdList freed(BufferId b) const {
    if (b == kNone || persistent_all_gather()) return {};
    return {b};
  }

  // ---- setup
  void setup_streams_and_comms() override {
    const auto& f = s_.fsdp;
    copy_in_ = b_.add_stream("all_gather_copy_in", StreamKind::copy);
    all_gather_ = b_.add_stream("all_gather", StreamKind::communication);
    reduce_scatter_ = b_.add_stream("reduce_scatter", StreamKind::communication);
    shard_ = b_.add_communicator("shard", world(), domains_spanned(world()));
    if (f.is_hybrid()) {
      all_reduce_ = b_.add_stream("all_reduce", StreamKind::communication);
      // Replicas are the ranks i·shard + j; they span as many nodes as their stride reaches.
      const int replicas = static_cast<int>(f.mesh_replicate);
      const int nodes = std::min(replicas, domains_spanned(replicas * world()));
      replicate_ = b_.add_communicator("replicate", replicas, std::max(1, nodes));
    }
    if (f.reshard_after_forward.mode == ReshardAfterForward::Mode::to_size) {
      const int size = static_cast<int>(f.reshard_after_forward.size);
      post_forward_ = b_.add_communicator("post_forward", size, domains_spanned(size));
    }
    rs_comm_ = f.separate_reduce_scatter_group
                   ? b_.add_communicator("reduce_scatter", world(), domains_spanned(world()))
                   : shard_;
    st_.assign(layouts_.size(), {});
    for (int g = 0; g < static_cast<int>(layouts_.size()); ++g) {
      if (has_params(g) && !is_root(g)) last_group_ = g;  // groups come in forward order
    }
  }

  BufferId unsharded_params(int g) const override {
    return st_[static_cast<std::size_t>(g)].unsharded;
  }

  bool reshards_after_forward(int g) const {
    // generation.keep_unsharded: set_reshard_after_forward(False) on every module for the call.
    if (generating() && s_.training.generation.keep_unsharded) return false;
    if (is_root(g)) return s_.fsdp.reshard_root_after_forward;
    // torchtitan: reshard_after_forward = layer_id < n_layers - 1 (its apply_fsdp).
    if (g == last_group_ && !s_.fsdp.reshard_last_after_forward) return false;
    return s_.fsdp.reshard_after_forward.mode != ReshardAfterForward::Mode::off;
  }
  bool to_smaller_mesh() const { return post_forward_ != kNone; }

  // ---- FSDPParamGroup.unshard. `async_op`: FSDPModule.unshard(async_op=True) from the training
  // step, whose copy-in runs on the current (default) stream (FSDPCommContext.
  // get_all_gather_streams) and whose collective is async on the process group's NCCL stream,
  // the one the all_gather stream stands for.
  void unshard(int g, bool prefetch, bool async_op = false) {
    auto& st = st_[static_cast<std::size_t>(g)];
    if (!has_params(g) || st.ag_op != kNone || st.state == Sharded::unsharded) return;
    if (st.reshard_event != kNone) {
      stream_wait(copy_in_, st.reshard_event);
      stream_wait(all_gather_, st.reshard_event);
      st.reshard_event = kNone;
    }
    const bool post_forward = st.state == Sharded::sharded_post_forward;
    const CommId comm = post_forward ? post_forward_ : shard_;
    const int comm_size = b_.schedule().communicators[static_cast<std::size_t>(comm)].size;
    const std::int64_t padded = layout(g).sharded_numel * world();
    const std::int64_t per_rank = padded / comm_size;
    BufferId staging = kNone;
    if (offload_ && !post_forward) {
      // CPUOffloadPolicy: the sharded parameters are copied host → device on the copy-in stream.
      Op h2d = make_op(OpKind::h2d, async_op ? compute_stream_ : copy_in_, gid(g));
      h2d.bytes = elems(per_rank, orig_dtype_);
      h2d.label = b_.op_label(s_.fsdp.cpu_offload.pin_memory ? "pinned" : "pageable");
      staging = b_.add_buffer(buffer_name("h2d_params"), h2d.bytes, orig_dtype_,
                              BufferCategory::sharded_params, gid(g));
      h2d.allocs.push_back(staging);
      h2d.uses.push_back(sharded_params_[static_cast<std::size_t>(g)]);
      h2d.input = b_.first(sharded_params_[static_cast<std::size_t>(g)], per_rank);
      h2d.output = b_.whole(staging);
      b_.emit(std::move(h2d));
    }
    Op& copy_in = b_.add_op(OpKind::copy_in, async_op ? compute_stream_ : copy_in_, gid(g));
    copy_in.bytes = elems(per_rank, param_dtype_);
    const BufferId source = post_forward       ? st.post_forward_shard
                            : staging != kNone ? staging
                                               : sharded_params_[static_cast<std::size_t>(g)];
    copy_in.uses.push_back(source);
    // The all-gather input is a view into the output (all_gather_copy_in allocates only the
    // output).
    if (persistent_all_gather()) {
      // A custom AllGather whose allocate() returns one buffer per group, made on its first
      // call and kept (FSDPModule.set_custom_all_gather): the copy-in writes into it.
      if (st.persistent_ag == kNone) {
        st.persistent_ag = b_.add_buffer(BufferName{b_.label("all_gather_output.persistent"), true},
                                         elems(padded, param_dtype_), param_dtype_,
                                         BufferCategory::all_gather_output, gid(g));
        copy_in.allocs.push_back(st.persistent_ag);
      } else {
        copy_in.uses.push_back(st.persistent_ag);
      }
      st.ag_output = st.persistent_ag;
    } else {
      st.ag_output =
          comm_buffer(b_.add_buffer(buffer_name("all_gather_output"), elems(padded, param_dtype_),
                                    param_dtype_, BufferCategory::all_gather_output, gid(g)));
      copy_in.allocs.push_back(st.ag_output);
    }
    if (staging != kNone) copy_in.frees.push_back(staging);
    copy_in.input = b_.first(source, per_rank);
    copy_in.output = b_.rank_chunk(st.ag_output, per_rank);
    const OpId copy_in_id = b_.last_op();
    Op& ag = b_.add_op(OpKind::all_gather, all_gather_, gid(g));
    ag.comm = comm;
    ag.bytes = elems(padded, param_dtype_);
    ag.deps.push_back(copy_in_id);  // all_gather_stream.wait_stream(all_gather_copy_in_stream)
    ag.uses.push_back(st.ag_output);
    ag.input = b_.rank_chunk(st.ag_output, per_rank);  // in place, as all_gather_copy_in views it
    ag.output = b_.whole(st.ag_output);
    ag.fixed_time = compute_.groups[static_cast<std::size_t>(g)].all_gather_time;
    if (prefetch) ag.label = b_.op_label("prefetch");
    if (async_op) ag.label = b_.op_label("unshard(async_op=True)");
    st.ag_op = b_.last_op();
    st.async_op = async_op;
  }

  // ---- FSDPParamGroup.wait_for_unshard
  void wait_for_unshard(int g) {
    auto& st = st_[static_cast<std::size_t>(g)];
    if (st.ag_op == kNone) return;
    const bool forward = forward_phase();
    // The previous group's all-gather output, kept to overlap its copy-out with this
    // all-gather: the all-gather streams wait for that copy-out now, but the output is freed
    // after this copy-out, when wait_for_unshard returns (it binds the state to a local,
    // prev_all_gather_state, that outlives `comm_ctx.all_gather_state = None`).
    BufferId previous = kNone;
    if (forward && deferred_ag_output_ != kNone) {
      stream_wait(copy_in_, deferred_copy_out_);
      stream_wait(all_gather_, deferred_copy_out_, {}, "previous all-gather copy-out");
      previous = deferred_ag_output_;
      deferred_ag_output_ = kNone;
      deferred_copy_out_ = kNone;
    }
    Op& copy_out = b_.add_op(OpKind::copy_out, compute_stream_, gid(g));
    copy_out.bytes = elems(layout(g).numel, param_dtype_);
    copy_out.deps.push_back(st.ag_op);  // current stream waits on the all-gather event
    copy_out.uses.push_back(st.ag_output);
    st.unsharded = b_.add_buffer(buffer_name("unsharded_params"), copy_out.bytes, param_dtype_,
                                 BufferCategory::unsharded_params, gid(g));
    copy_out.allocs.push_back(st.unsharded);
    copy_out.input = b_.whole(st.ag_output);
    copy_out.output = b_.whole(st.unsharded);
    if (st.post_forward_shard != kNone) {
      copy_out.frees.push_back(st.post_forward_shard);
      st.post_forward_shard = kNone;
    }
    for (BufferId b : freed(previous)) copy_out.frees.push_back(b);
    // An async unshard's output is freed right after its copy-out, on the stream it was
    // allocated on (wait_for_unshard defers only a forward's synchronous all-gather).
    if (st.async_op)
      for (BufferId b : freed(st.ag_output)) copy_out.frees.push_back(b);
    const OpId copy_out_id = b_.last_op();
    if (st.async_op) {
      stream_wait(copy_in_, copy_out_id);
      stream_wait(all_gather_, copy_out_id);
    } else if (forward) {
      deferred_ag_output_ = st.ag_output;
      deferred_copy_out_ = copy_out_id;
    } else {
      stream_wait(copy_in_, copy_out_id);
      stream_wait(all_gather_, copy_out_id, freed(st.ag_output), "free all-gather output");
    }
    st.ag_output = kNone;
    st.ag_op = kNone;
    st.async_op = false;
    st.state = Sharded::unsharded;
  }

  // ---- FSDPParamGroup.reshard (forward: post_forward; backward: post_backward; `explicit_call`:
  // FSDPModule.reshard() from the training step, which frees to the full shard: _to_sharded)
  void reshard(int g, bool explicit_call = false) {
    auto& st = st_[static_cast<std::size_t>(g)];
    if (st.state != Sharded::unsharded) return;
    const bool forward = forward_phase() && !explicit_call;
    Op& op = b_.add_op(OpKind::reshard, compute_stream_, gid(g));
    op.frees.push_back(st.unsharded);
    if (forward && to_smaller_mesh() && !is_root(g)) {
      // _to_sharded_post_forward: keep this rank's 1/size slice of the unsharded parameters.
      const int size = static_cast<int>(s_.fsdp.reshard_after_forward.size);
      const std::int64_t numel = layout(g).sharded_numel * world() / size;
      st.post_forward_shard =
          b_.add_buffer(buffer_name("post_forward_shard"), elems(numel, param_dtype_), param_dtype_,
                        BufferCategory::sharded_params, gid(g));
      op.allocs.push_back(st.post_forward_shard);
      op.bytes = elems(numel, param_dtype_);
      op.label = b_.op_label(fmt::format("to {} ranks", size));
      st.reshard_event = b_.last_op();
      st.state = Sharded::sharded_post_forward;
    } else {
      st.state = Sharded::sharded;
    }
    st.unsharded = kNone;
  }

  // ---- hooks
  void root_pre_forward() override {
    // fsdp.unshard_ahead: the training step's unshard(async_op=True) calls come before the
    // model's forward, so before the root's pre-forward and its all-gather.
    std::int64_t ahead = generating() ? 0 : s_.fsdp.unshard_ahead;
    for (auto it = children_.begin(); it != children_.end() && ahead > 0; ++it) {
      if (!has_params(*it)) continue;
      unshard(*it, false, true);
      --ahead;
    }
    // Wait for the optimizer before the all-gathers: on the post-optimizer event when set,
    // otherwise on everything the default stream has so far.
    const OpId event = post_optim_event_ != kNone ? post_optim_event_ : b_.last_on(compute_stream_);
    post_optim_event_ = kNone;
    if (event == kNone) return;
    stream_wait(copy_in_, event);
    stream_wait(all_gather_, event);
  }

  void pre_forward(int g) override {
    if (!has_params(g)) return;
    unshard(g, false);
    wait_for_unshard(g);
    const std::int64_t k = s_.fsdp.forward_prefetch_modules;
    if (k > 0 && !is_root(g)) {
      const auto it = std::find(children_.begin(), children_.end(), g);
      for (auto next = it + 1; next != children_.end() && next - it <= k; ++next)
        unshard(*next, true);
    }
  }

  void post_forward(int g) override {
    if (has_params(g) && reshards_after_forward(g)) reshard(g);
    if (!is_root(g)) return;
    free_deferred_all_gather("free last all-gather output");  // FSDPState._post_forward
    // MixedPrecisionPolicy.output_dtype: the root's output, the logits, cast last in
    // FSDPState._post_forward ("FSDP::cast_forward_outputs"). Every other module's output is
    // already in output_dtype where the scenario reader accepts one (docs/semantics.md).
    if (const auto to = root_output_cast(s_))
      cast_handed_on(g, compute_dtype(s_), *to, "cast_forward_outputs");
  }

  // comm_ctx.all_gather_state: the all-gather streams wait on the kept copy-out, then its output is
  // freed.
  void free_deferred_all_gather(std::string_view label) {
    if (deferred_ag_output_ == kNone) return;
    stream_wait(copy_in_, deferred_copy_out_);
    stream_wait(all_gather_, deferred_copy_out_, freed(deferred_ag_output_), label);
    deferred_ag_output_ = kNone;
    deferred_copy_out_ = kNone;
  }

  void pre_backward(int g) override {
    // The output's gradient passes the output cast's ToCopyBackward before it reaches the hook
    // FSDPState._register_pre_backward_hook put on the uncast output.
    if (is_root(g)) {
      if (const auto from = root_output_cast(s_))
        cast_handed_on(g, *from, compute_dtype(s_), "cast_forward_outputs.backward");
    }
    if (!has_params(g)) return;
    unshard(g, false);
    wait_for_unshard(g);
    const auto it = std::find(post_forward_order_.begin(), post_forward_order_.end(), g);
    const std::int64_t index = it - post_forward_order_.begin();
    const std::int64_t k = (is_root(g) || s_.fsdp.backward_prefetch_modules == 0)
                               ? 1
                               : s_.fsdp.backward_prefetch_modules;
    for (std::int64_t i = 1; i <= k && index - i >= 0; ++i) {
      unshard(post_forward_order_[static_cast<std::size_t>(index - i)], true);
    }
  }

  void on_backward_op(int g, std::size_t p, std::int64_t param_numel, Op& op) override {
    if (param_numel == 0) return;
    auto& st = st_[static_cast<std::size_t>(g)];
    while (st.grads.size() <= p) st.grads.push_back(kNone);
    BufferId& grad = st.grads[p];
    if (grad == kNone) {
      const std::int64_t numel = param_numel < 0 ? layout(g).numel : param_numel;
      grad = b_.add_buffer(buffer_name("unsharded_grad"), elems(numel, param_dtype_), param_dtype_,
                           BufferCategory::unsharded_grads, gid(g));
      op.allocs.push_back(grad);
    } else {
      op.uses.push_back(grad);  // autograd accumulates into .grad
    }
  }

  // Hands the group's unsharded gradients to `op`, which frees them.
  void free_grads(GroupState& st, Op& op) {
    for (BufferId grad : st.grads) {
      if (grad != kNone) op.frees.push_back(grad);
    }
    st.grads.clear();
  }

  void post_backward(int g) override {
    if (!has_params(g)) return;
    auto& st = st_[static_cast<std::size_t>(g)];
    const bool keeps_low_precision = reduce_dtype_ == param_dtype_;
    if (!sync_gradients()) {
      if (s_.fsdp.reshard_after_backward) reshard(g);
      if (!keeps_low_precision) {
        // accumulate_unsharded_grad_if_needed: accumulate in the reduce dtype
        Op acc = make_op(OpKind::grad_div, compute_stream_, gid(g));
        acc.label = b_.op_label("accumulate");
        acc.bytes = elems(layout(g).numel, reduce_dtype_);
        if (st.accumulated == kNone) {
          st.accumulated = b_.add_buffer(buffer_name("accumulated_grad"), acc.bytes, reduce_dtype_,
                                         BufferCategory::unsharded_grads, gid(g));
          acc.allocs.push_back(st.accumulated);
        } else {
          acc.uses.push_back(st.accumulated);
        }
        free_grads(st, acc);
        b_.emit(std::move(acc));
      }
      return;
    }
    if (s_.fsdp.reshard_after_backward) reshard(g);
    if (rs_state_input_ != kNone) {
      stream_wait(compute_stream_, rs_state_event_, {rs_state_input_}, "previous reduce-scatter");
      rs_state_input_ = kNone;
      rs_state_event_ = kNone;
    }
    const std::int64_t padded = layout(g).sharded_numel * world();
    // foreach_reduce: copy-in on the current stream, then the reduce-scatter stream waits for it.
    Op& copy_in = b_.add_op(OpKind::reduce_copy_in, compute_stream_, gid(g));
    copy_in.bytes = elems(padded, reduce_dtype_);
    const BufferId rs_input =
        comm_buffer(b_.add_buffer(buffer_name("reduce_scatter_input"), copy_in.bytes, reduce_dtype_,
                                  BufferCategory::reduce_scatter_input, gid(g)));
    copy_in.allocs.push_back(rs_input);
    copy_in.output = b_.whole(rs_input);
    // One gradient to copy in (the accumulated one, or a group's single parameter's) is named;
    // several are read from the buffers the op frees.
    if (st.accumulated != kNone) {
      copy_in.input = b_.whole(st.accumulated);
    } else if (std::count_if(st.grads.begin(), st.grads.end(),
                             [](BufferId b) { return b != kNone; }) == 1) {
      copy_in.input = b_.whole(
          *std::find_if(st.grads.begin(), st.grads.end(), [](BufferId b) { return b != kNone; }));
    }
    free_grads(st, copy_in);
    if (st.accumulated != kNone) copy_in.frees.push_back(st.accumulated);
    st.accumulated = kNone;
    const OpId copy_in_id = b_.last_op();

    Op& rs = b_.add_op(OpKind::reduce_scatter, reduce_scatter_, gid(g));
    rs.comm = rs_comm_;
    rs.bytes = elems(padded, reduce_dtype_);
    rs.deps.push_back(copy_in_id);
    rs.uses.push_back(rs_input);
    rs.fixed_time = compute_.groups[static_cast<std::size_t>(g)].reduce_scatter_time;
    const bool becomes_grad = reduce_dtype_ == orig_dtype_ &&
                              sharded_grads_[static_cast<std::size_t>(g)] == kNone && !offload_ &&
                              !s_.fsdp.is_hybrid();
    // foreach_reduce allocates the output with the same allocate() as the input; when it is the
    // gradient's own dtype it becomes the sharded .grad, which then lives in that pool too.
    const BufferId rs_output = comm_buffer(b_.add_buffer(
        buffer_name(becomes_grad ? "sharded_grad" : "reduce_scatter_output"),
        elems(layout(g).sharded_numel, reduce_dtype_), reduce_dtype_,
        becomes_grad ? BufferCategory::sharded_grads : BufferCategory::reduce_scatter_output,
        gid(g)));
    rs.allocs.push_back(rs_output);
    rs.input = b_.whole(rs_input);
    rs.output = b_.whole(rs_output);
    const OpId rs_id = b_.last_op();
    rs_state_input_ = rs_input;  // comm_ctx.reduce_scatter_state keeps the input alive
    rs_state_event_ = rs_id;

    StreamId post_stream = reduce_scatter_;
    if (s_.fsdp.is_hybrid()) {
      const bool all_reduce_now =
          s_.fsdp.requires_all_reduce == SyncSchedule::every_microbatch || last_microbatch();
      if (!all_reduce_now) {
        // Accumulate the partial reduce output in the reduce-scatter stream; no all-reduce yet.
        Op acc = make_op(OpKind::grad_div, reduce_scatter_, gid(g));
        acc.label = b_.op_label("partial reduce");
        acc.bytes = elems(layout(g).sharded_numel, reduce_dtype_);
        if (st.partial_reduce == kNone) {
          st.partial_reduce = rs_output;
          acc.uses.push_back(rs_output);
        } else {
          acc.uses.push_back(st.partial_reduce);
          acc.frees.push_back(rs_output);
        }
        st.post_reduce = b_.emit(std::move(acc));
        return;
      }
      Op ar = make_op(OpKind::all_reduce, all_reduce_, gid(g));
      ar.comm = replicate_;
      ar.bytes = elems(layout(g).sharded_numel, reduce_dtype_);
      ar.deps.push_back(rs_id);  // all_reduce_stream.wait_stream(reduce_scatter_stream)
      ar.uses.push_back(rs_output);
      // foreach_reduce adds the partial output into this one, then all-reduces it in place.
      ar.input = b_.whole(rs_output);
      ar.output = ar.input;
      if (st.partial_reduce != kNone && st.partial_reduce != rs_output) {
        ar.uses.push_back(st.partial_reduce);
        ar.frees.push_back(st.partial_reduce);
      }
      st.partial_reduce = kNone;
      b_.emit(std::move(ar));
      post_stream = all_reduce_;
    }
    // Divide (when not averaged by NCCL) and view or cast into the sharded gradient.
    Op& div = b_.add_op(OpKind::grad_div, post_stream, gid(g));
    div.bytes =
        elems(layout(g).sharded_numel, reduce_dtype_) + elems(layout(g).sharded_numel, orig_dtype_);
    div.label =
        reduce_dtype_ == orig_dtype_
            ? b_.op_label("view")  // a literal: the label table's address cache answers
            : b_.op_label(fmt::format("{} → {}", to_string(reduce_dtype_), to_string(orig_dtype_)));
    if (becomes_grad) {
      sharded_grads_[static_cast<std::size_t>(g)] = rs_output;
      div.uses.push_back(rs_output);
    } else if (offload_) {
      div.uses.push_back(rs_output);
    } else {
      sharded_grad(g, div);
      div.uses.push_back(rs_output);
      div.frees.push_back(rs_output);
    }
    st.post_reduce = b_.last_op();
    if (offload_) {
      Op d2h = make_op(OpKind::d2h, post_stream, gid(g));
      d2h.bytes = elems(layout(g).sharded_numel, orig_dtype_);
      d2h.label = b_.op_label(s_.fsdp.cpu_offload.pin_memory ? "pinned" : "pageable");
      d2h.output = b_.whole(sharded_grad(g, d2h));
      d2h.uses.push_back(rs_output);
      d2h.frees.push_back(rs_output);
      d2h.input = b_.whole(rs_output);
      st.grad_offload = b_.emit(std::move(d2h));
      st.post_reduce = st.grad_offload;
    }
  }

  void finalize_backward() override {
    // _root_post_backward_final_callback → FSDPParamGroup.finalize_backward for every group,
    // and the wait on the last reduce-scatter, only when is_last_backward (set_is_last_backward):
    // otherwise both stay pending, and the next backward's first reduce waits on them.
    if (s_.fsdp.is_last_backward == SyncSchedule::last_microbatch && !last_microbatch()) return;
    Op wait = make_op(OpKind::stream_wait, compute_stream_, kNone);
    wait.label = b_.op_label("post-reduce events");
    Op cpu = make_op(OpKind::cpu_wait, cpu_, kNone);
    cpu.label = b_.op_label("gradient offload");
    for (auto& st : st_) {
      if (st.post_reduce != kNone) wait.deps.push_back(st.post_reduce);
      if (st.grad_offload != kNone) cpu.deps.push_back(st.grad_offload);
      st.post_reduce = st.grad_offload = kNone;
    }
    if (!wait.deps.empty()) b_.emit(std::move(wait));
    if (!cpu.deps.empty()) b_.emit(std::move(cpu));
    if (rs_state_input_ != kNone) {
      stream_wait(compute_stream_, rs_state_event_, {rs_state_input_}, "last reduce-scatter");
      rs_state_input_ = kNone;
      rs_state_event_ = kNone;
    }
  }

  void after_generation_call() override {
    // generation.keep_unsharded: the step calls reshard() on every module after generating.
    if (s_.training.generation.keep_unsharded) {
      for (int g = 0; g < static_cast<int>(layouts_.size()); ++g) reshard(g, true);
      return;
    }
    // The registered method's post-forward hook runs after the model's own forward nested in it
    // has left the root's group IDLE, so FSDPParamGroup.reshard frees it fully (_to_sharded):
    // the root kept unsharded through the call is resharded when generate returns.
    reshard(root_, true);
  }

  void after_optimizer_step(OpId step) override {
    if (s_.fsdp.post_optim_event) post_optim_event_ = step;
  }

  StreamId copy_in_ = kNone, all_gather_ = kNone, reduce_scatter_ = kNone, all_reduce_ = kNone;
  CommId shard_ = kNone, replicate_ = kNone, post_forward_ = kNone, rs_comm_ = kNone;
  std::vector<GroupState> st_;
  int last_group_ = -1;  // the last group with parameters in forward order, the root aside
  BufferId deferred_ag_output_ = kNone;  // comm_ctx.all_gather_state
  OpId deferred_copy_out_ = kNone;
  BufferId rs_state_input_ = kNone;  // comm_ctx.reduce_scatter_state
  OpId rs_state_event_ = kNone;
  OpId post_optim_event_ = kNone;
};

}  // namespace

Schedule lower_fsdp2(const Scenario& scenario) {
  return Fsdp2Lowerer(scenario).run();
}

}  // namespace shardscope::lowering
