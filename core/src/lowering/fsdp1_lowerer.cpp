// FSDP1 (FullyShardedDataParallel) lowering. Follows torch/distributed/fsdp/:
//   _runtime_utils.py  _root_pre_forward, _pre_forward_unshard, _unshard (rate limiter),
//                      _post_forward_reshard, _pre_backward_hook, _post_backward_hook,
//                      _should_free_in_backward, _reduce_grad, _post_backward_final_callback,
//                      _prefetch_handle, _get_handle_to_prefetch
//   _exec_order_utils.py  _ExecOrderData.get_handle_to_backward_prefetch / _forward_prefetch
//   _limiter_utils.py  _FreeEventQueue (two all-gathers in flight)
// docs/semantics.md walks through what each emitted op stands for.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <vector>

#include "../transformer_kernels.hpp"
#include "fsdp_lowerers.hpp"

namespace shardscope::lowering {
namespace {

// The views' gradients of one block as the tensors the allocator sees (Fsdp1Lowerer's
// view_grad_numels): autograd makes one per parameter, so no hole larger than the block's largest
// projection weight is needed. Its projection weights in order, neighbours that together are no
// larger than the largest as one (Llama's q, k, v and o projections): what the allocator needs at
// a fraction of the buffers. None for a model without blocks.
std::vector<std::int64_t> block_view_grad_numels(const ModelSpec& model) {
  if (model.family != ModelFamily::transformer) return {};
  const auto per_block = detail::projection_weight_numels(model.transformer);
  const std::int64_t largest = *std::max_element(per_block.begin(), per_block.end());
  std::vector<std::int64_t> packed;
  for (const std::int64_t numel : per_block) {
    if (!packed.empty() && packed.back() + numel <= largest) {
      packed.back() += numel;
    } else {
      packed.push_back(numel);
    }
  }
  return packed;
}

class Fsdp1Lowerer final : public Lowerer {
 public:
  explicit Fsdp1Lowerer(const Scenario& scenario)
      : Lowerer(scenario), block_view_grads_(block_view_grad_numels(scenario.model)) {}

 private:
  struct HandleState {
    bool unsharded = false;
    BufferId full_param = kNone;  // the padded unsharded FlatParameter (all-gather output)
    bool ran_pre_backward = false;
    BufferId grad = kNone;     // unsharded flat gradient (accumulates under no_sync)
    bool grad_at_cat = false;  // the flat gradient is made after the backward (flat_grad_at_cat)
    OpId post_reduce = kNone;
  };

  ShardingStrategy strategy() const { return s_.fsdp.sharding_strategy; }
  bool no_shard() const { return strategy() == ShardingStrategy::no_shard || world() == 1; }
  bool reshard_after_forward_strategy() const {
    return strategy() == ShardingStrategy::full_shard ||
           strategy() == ShardingStrategy::hybrid_shard;
  }
  bool hybrid() const {
    return strategy() == ShardingStrategy::hybrid_shard ||
           strategy() == ShardingStrategy::hybrid_shard_zero2;
  }
  std::int64_t padded_numel(int g) const { return layout(g).sharded_numel * world(); }

  void setup_streams_and_comms() override {
    pre_unshard_ = b_.add_stream("pre_unshard", StreamKind::copy);
    unshard_ = b_.add_stream("unshard", StreamKind::communication);
    post_backward_ = b_.add_stream("post_backward", StreamKind::communication);
    shard_ = b_.add_communicator("shard", world(), domains_spanned(world()));
    if (hybrid() || no_shard()) {
      const int replicas = static_cast<int>(s_.fsdp.mesh_replicate);
      replicate_ = b_.add_communicator("replicate", replicas,
                                       std::min(replicas, domains_spanned(replicas * world())));
    }
    if (hybrid()) all_reduce_ = b_.add_stream("all_reduce", StreamKind::communication);
    st_.assign(layouts_.size(), {});
    if (no_shard()) {
      for (auto& st : st_) st.unsharded = true;  // NO_SHARD keeps full parameters: no all-gathers
    }
  }

  BufferId unsharded_params(int g) const override {
    const auto& st = st_[static_cast<std::size_t>(g)];
    return st.full_param != kNone ? st.full_param : sharded_params_[static_cast<std::size_t>(g)];
  }

  // _unshard: pre-unshard (cast / host copy), rate limiter, all-gather on the unshard stream.
  void unshard(int g, bool prefetch) {
    auto& st = st_[static_cast<std::size_t>(g)];
    if (!has_params(g) || st.unsharded) return;
    const std::int64_t shard = layout(g).sharded_numel;
    BufferId input = sharded_params_[static_cast<std::size_t>(g)];
    BufferId low_precision = kNone;
    OpId pre = kNone;
    if (offload_) {
      Op h2d = make_op(OpKind::h2d, pre_unshard_, gid(g));
      h2d.bytes = elems(shard, orig_dtype_);
      h2d.label = b_.op_label(s_.fsdp.cpu_offload.pin_memory ? "pinned" : "pageable");
      low_precision = b_.add_buffer(buffer_name("device_shard"), elems(shard, param_dtype_),
                                    param_dtype_, BufferCategory::sharded_params, gid(g));
      h2d.allocs.push_back(low_precision);
      h2d.uses.push_back(input);
      h2d.input = b_.first(input, shard);
      h2d.output = b_.whole(low_precision);
      pre = b_.emit(std::move(h2d));
    } else if (param_dtype_ != orig_dtype_) {
      Op& cast = b_.add_op(OpKind::copy_in, pre_unshard_, gid(g));  // _use_low_precision_shard
      cast.bytes = elems(shard, param_dtype_);
      cast.label =
          b_.op_label(fmt::format("{} → {}", to_string(orig_dtype_), to_string(param_dtype_)));
      low_precision = b_.add_buffer(buffer_name("mp_shard"), cast.bytes, param_dtype_,
                                    BufferCategory::sharded_params, gid(g));
      cast.allocs.push_back(low_precision);
      cast.uses.push_back(input);
      cast.input = b_.first(input, shard);
      cast.output = b_.whole(low_precision);
      pre = b_.last_op();
    }
    if (s_.fsdp.limit_all_gathers && free_events_.size() >= 2) {
      // _FreeEventQueue.dequeue_if_needed: the CPU blocks on the free event two reshards back.
      Op wait = make_op(OpKind::cpu_wait, cpu_, gid(g));
      wait.deps.push_back(free_events_.front());
      wait.label = b_.op_label("rate limiter");
      free_events_.pop_front();
      b_.emit(std::move(wait));
    }
    Op& ag = b_.add_op(OpKind::all_gather, unshard_, gid(g));
    ag.comm = shard_;
    ag.bytes = elems(padded_numel(g), param_dtype_);
    if (pre != kNone) ag.deps.push_back(pre);  // unshard_stream.wait_stream(pre_unshard_stream)
    ag.uses.push_back(low_precision != kNone ? low_precision : input);
    st.full_param = b_.add_buffer(buffer_name("unsharded_flat_param"), ag.bytes, param_dtype_,
                                  BufferCategory::unsharded_params, gid(g));
    ag.allocs.push_back(st.full_param);
    // FSDP1 gathers the (low-precision) shard into the flat parameter: not in place.
    ag.input = b_.first(low_precision != kNone ? low_precision : input, shard);
    ag.output = b_.whole(st.full_param);
    if (low_precision != kNone)
      ag.frees.push_back(low_precision);  // _free_low_precision_sharded_param
    ag.fixed_time = compute_.groups[static_cast<std::size_t>(g)].all_gather_time;
    if (prefetch) ag.label = b_.op_label("prefetch");
    st.unsharded = true;
  }

  // The reshard op, or kNone when the handle holds no unsharded parameter.
  OpId reshard(int g) {
    auto& st = st_[static_cast<std::size_t>(g)];
    if (!st.unsharded || st.full_param == kNone) return kNone;
    b_.add_op(OpKind::reshard, compute_stream_, gid(g)).frees.push_back(st.full_param);
    const OpId id = b_.last_op();
    if (s_.fsdp.limit_all_gathers) free_events_.push_back(id);
    st.full_param = kNone;
    st.unsharded = false;
    return id;
  }

  // Whether the flat gradient of `g` is made after its backward op rather than by it. Autograd
  // makes the gradient of each parameter view as the backward reaches its linear, while the
  // block's saved (or recomputed) tensors are freed as they are consumed; once all views have
  // theirs, the split's backward concatenates them into the flat gradient (torch.cat), the views'
  // gradients freed after it, and then the post-backward hook runs and reshards. The block's
  // activations and its gradients are never all alive at once: the backward op holds the
  // activations and its workspace, the post-backward's reshard op (on the same stream, before
  // the parameters are freed) the views' gradients and the flat one. A block's handle that
  // reshards after its backward and syncs: the root's views (a tied head's gradient made early,
  // the embedding's last) and gradients accumulated under no_sync stay with the backward op.
  bool flat_grad_at_cat(int g) const { return !is_root(g) && !no_shard() && sync_gradients(); }

  // The views' gradients torch.cat reads: each block's (block_view_grads_), and the rest of the
  // handle (biases, norms) as one.
  std::vector<std::int64_t> view_grad_numels(int g) const {
    std::vector<std::int64_t> out;
    std::int64_t rest = layout(g).numel;
    for (std::int64_t b = 0; b < layout(g).block_count; ++b) {
      for (const std::int64_t numel : block_view_grads_) {
        out.push_back(numel);
        rest -= numel;
      }
    }
    if (rest > 0) out.push_back(rest);
    return out;
  }

  // The handle FSDP1 prefetches in backward: the one before `g` in post-forward order, if it
  // still needs its pre-backward unshard.
  int backward_prefetch_target(int g) const {
    const auto it = std::find(post_forward_order_.begin(), post_forward_order_.end(), g);
    if (it == post_forward_order_.begin() || it == post_forward_order_.end()) return -1;
    const int target = *(it - 1);
    const auto& t = st_[static_cast<std::size_t>(target)];
    return (!t.ran_pre_backward && !t.unsharded) ? target : -1;
  }

  void root_pre_forward() override {
    // _wait_for_computation_stream: the unshard and pre-unshard streams wait on the default stream.
    const OpId last = b_.last_on(compute_stream_);
    stream_wait(unshard_, last);
    stream_wait(pre_unshard_, last);
  }

  // Handles in forward order: the root, then the children with parameters.
  std::vector<int> forward_order() const {
    std::vector<int> order{root_};
    for (int c : children_) {
      if (has_params(c)) order.push_back(c);
    }
    return order;
  }

  // forward_prefetch uses the execution order recorded by the first forward and backward
  // (_ExecOrderData.next_iter runs in _post_backward_final_callback): every later micro-batch
  // prefetches, the second of the first iteration too.
  bool forward_prefetching() const {
    return s_.fsdp.forward_prefetch && (b_.iteration() > 0 || b_.microbatch() > 0);
  }

  void pre_forward(int g) override {
    if (!has_params(g)) return;
    unshard(g, false);
    stream_wait(compute_stream_,
                b_.last_on(unshard_));  // current_stream.wait_stream(unshard_stream)
    if (forward_prefetching()) {
      const auto order = forward_order();
      const auto it = std::find(order.begin(), order.end(), g);
      if (it != order.end() && it + 1 != order.end()) unshard(*(it + 1), true);
    }
  }

  // The post-backward hook is registered on the FlatParameter's AccumulateGrad
  // (_register_post_backward_hook), which runs once the gradients of the parameter views reach
  // it. Autograd runs the ready node of the highest sequence number first, and the views' node
  // was created when the handle was unsharded in forward (FlatParamHandle.unshard →
  // _use_unsharded_views). A handle prefetched in forward was unsharded in the previous handle's
  // pre-forward, before that handle's compute: so its hook runs only after the previous handle's
  // backward compute (and that handle's own hook, whose views are newer). Checkpointing does not
  // change this (the oracle suite's fwd-prefetch checkpointing cases).
  int post_backward_after(int g) const override {
    if (!forward_prefetching() || is_root(g) || !has_params(g)) return g;
    const auto order = forward_order();
    const auto it = std::find(order.begin(), order.end(), g);
    return it == order.begin() || it == order.end() ? g : *(it - 1);
  }

  // FSDP1 (use_orig_params) shows a parameter as its sharded view outside its unit's forward, so
  // a chunked loss, which applies the output head itself, runs inside the root's forward (as
  // Liger's patched Hugging Face models do): its backward comes after the root's pre-backward.
  bool loss_inside_root_forward() const override { return s_.training.loss == LossRecipe::chunked; }

  void post_forward(int g) override {
    if (!has_params(g)) return;
    st_[static_cast<std::size_t>(g)].ran_pre_backward = false;  // _register_pre_backward_hooks
    if (no_shard()) return;
    if (reshard_after_forward_strategy() && !is_root(g)) reshard(g);
  }

  void pre_backward(int g) override {
    if (!has_params(g)) return;
    auto& st = st_[static_cast<std::size_t>(g)];
    ++pre_backward_hooks_;
    unshard(g, false);
    stream_wait(compute_stream_, b_.last_on(unshard_));
    st.ran_pre_backward = true;
    if (s_.fsdp.backward_prefetch == BackwardPrefetch::backward_pre) {
      if (const int target = backward_prefetch_target(g); target >= 0) unshard(target, true);
    }
  }

  // FSDP1's gradient is the FlatParameter's, one tensor for the whole handle.
  void on_backward_op(int g, std::size_t /*p*/, std::int64_t param_numel, Op& op) override {
    if (param_numel == 0) return;
    auto& st = st_[static_cast<std::size_t>(g)];
    if (st.grad == kNone && flat_grad_at_cat(g)) {
      st.grad_at_cat = true;
      return;
    }
    if (st.grad == kNone) {
      st.grad =
          b_.add_buffer(buffer_name("unsharded_flat_grad"), elems(padded_numel(g), param_dtype_),
                        param_dtype_, BufferCategory::unsharded_grads, gid(g));
      op.allocs.push_back(st.grad);
    } else {
      op.uses.push_back(st.grad);
    }
  }

  void post_backward(int g) override {
    if (!has_params(g)) return;
    auto& st = st_[static_cast<std::size_t>(g)];
    // _should_free_in_backward: sharded strategies free after backward, except that strategies
    // keeping parameters after forward also keep them while not syncing (no_sync).
    const bool sync = sync_gradients();
    OpId resharded = kNone;
    if (!no_shard() && (sync || reshard_after_forward_strategy())) resharded = reshard(g);
    if (st.grad_at_cat) {
      // torch.cat of the views' gradients into the flat one, just before the hook's reshard.
      Op& cat = b_.op(resharded != kNone ? resharded : b_.last_on(compute_stream_));
      st.grad =
          b_.add_buffer(buffer_name("unsharded_flat_grad"), elems(padded_numel(g), param_dtype_),
                        param_dtype_, BufferCategory::unsharded_grads, gid(g));
      cat.allocs.push_back(st.grad);
      for (const std::int64_t numel : view_grad_numels(g)) {
        const BufferId view = b_.add_buffer(buffer_name("view_grad"), elems(numel, param_dtype_),
                                            param_dtype_, BufferCategory::unsharded_grads, gid(g));
        cat.allocs.push_back(view);
        cat.frees.push_back(view);
      }
      st.grad_at_cat = false;
    }
    if (s_.fsdp.backward_prefetch == BackwardPrefetch::backward_post) {
      if (const int target = backward_prefetch_target(g); target >= 0) unshard(target, true);
    }
    if (!sync) return;  // no_sync: the unsharded gradient accumulates
    BufferId grad = st.grad;
    st.grad = kNone;
    if (reduce_dtype_ != param_dtype_) {
      // flat_param.grad.data = flat_param.grad.to(reduce_dtype), on the default stream
      Op& cast = b_.add_op(OpKind::reduce_copy_in, compute_stream_, gid(g));
      cast.bytes = elems(padded_numel(g), reduce_dtype_);
      cast.label =
          b_.op_label(fmt::format("{} → {}", to_string(param_dtype_), to_string(reduce_dtype_)));
      const BufferId cast_grad =
          b_.add_buffer(buffer_name("reduce_dtype_grad"), cast.bytes, reduce_dtype_,
                        BufferCategory::reduce_scatter_input, gid(g));
      cast.allocs.push_back(cast_grad);
      cast.frees.push_back(grad);
      cast.input = b_.whole(grad);
      cast.output = b_.whole(cast_grad);
      grad = cast_grad;
    }
    const OpId compute_done = b_.last_on(compute_stream_);
    BufferId reduced = kNone;
    OpId last = kNone;
    if (no_shard()) {
      Op ar = make_op(OpKind::all_reduce, post_backward_, gid(g));
      ar.comm = replicate_;
      ar.bytes = elems(padded_numel(g), reduce_dtype_);
      ar.deps.push_back(compute_done);
      ar.uses.push_back(grad);
      ar.input = b_.whole(grad);  // in place on the flat gradient
      ar.output = ar.input;
      reduced = grad;
      last = b_.emit(std::move(ar));
    } else {
      Op& rs = b_.add_op(OpKind::reduce_scatter, post_backward_, gid(g));
      rs.comm = shard_;
      rs.bytes = elems(padded_numel(g), reduce_dtype_);
      rs.deps.push_back(compute_done);  // post_backward_stream.wait_stream(current_stream)
      rs.uses.push_back(grad);
      rs.fixed_time = compute_.groups[static_cast<std::size_t>(g)].reduce_scatter_time;
      reduced = b_.add_buffer(buffer_name("new_sharded_grad"),
                              elems(layout(g).sharded_numel, reduce_dtype_), reduce_dtype_,
                              BufferCategory::reduce_scatter_output, gid(g));
      rs.allocs.push_back(reduced);
      rs.frees.push_back(grad);
      rs.input = b_.whole(grad);
      rs.output = b_.whole(reduced);  // record_stream on the post-backward stream, freed now
      last = b_.last_op();
      if (hybrid()) {
        Op ar = make_op(OpKind::all_reduce, all_reduce_, gid(g));
        ar.comm = replicate_;
        ar.bytes = elems(layout(g).sharded_numel, reduce_dtype_);
        ar.deps.push_back(last);
        ar.uses.push_back(reduced);
        ar.input = b_.whole(reduced);
        ar.output = ar.input;
        last = b_.emit(std::move(ar));
      }
    }
    // _post_reduce_grad: divide, cast to the parameter dtype and accumulate into _saved_grad_shard.
    Op& div = b_.add_op(OpKind::grad_div, hybrid() ? all_reduce_ : post_backward_, gid(g));
    div.bytes =
        elems(layout(g).sharded_numel, reduce_dtype_) + elems(layout(g).sharded_numel, grad_dtype_);
    div.label = b_.op_label(s_.fsdp.mixed_precision.keep_low_precision_grads ? "keep low precision"
                                                                             : "accumulate");
    div.uses.push_back(reduced);
    if (!offload_) sharded_grad(g, div);
    if (reduced != grad || !no_shard()) div.frees.push_back(reduced);
    if (no_shard()) div.frees.push_back(reduced);
    st.post_reduce = b_.last_op();
    if (offload_) {
      Op d2h = make_op(OpKind::d2h, hybrid() ? all_reduce_ : post_backward_, gid(g));
      d2h.bytes = elems(layout(g).sharded_numel, grad_dtype_);
      d2h.label = b_.op_label("_offload_grad");
      // The host gradient; what it copies from is the reduced shard, which the lowering frees
      // with the division before it (its input is not named).
      d2h.output = b_.whole(sharded_grad(g, d2h));
      st.post_reduce = b_.emit(std::move(d2h));
    }
  }

  void finalize_backward() override {
    // _post_backward_final_callback: the default stream waits for the post-backward (and
    // all-reduce) streams; with CPU offload the CPU synchronises.
    if (!sync_gradients()) return;
    OpId last =
        stream_wait(compute_stream_, b_.last_on(post_backward_), {}, "post-backward stream");
    if (all_reduce_ != kNone)
      last = stream_wait(compute_stream_, b_.last_on(all_reduce_), {}, "all-reduce stream");
    if (offload_) {
      Op sync = make_op(OpKind::cpu_wait, cpu_, kNone);
      sync.label = b_.op_label("synchronize");
      if (last != kNone) sync.deps.push_back(last);
      b_.emit(std::move(sync));
    }
    for (auto& st : st_) st.post_reduce = kNone;
  }

  StreamId pre_unshard_ = kNone, unshard_ = kNone, post_backward_ = kNone, all_reduce_ = kNone;
  CommId shard_ = kNone, replicate_ = kNone;
  std::vector<HandleState> st_;
  const std::vector<std::int64_t> block_view_grads_;  // one block's (block_view_grad_numels)
  std::deque<OpId> free_events_;
  int pre_backward_hooks_ = 0;
};

}  // namespace

Schedule lower_fsdp1(const Scenario& scenario) {
  return Fsdp1Lowerer(scenario).run();
}

}  // namespace shardscope::lowering
