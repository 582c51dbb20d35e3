#include "lowerer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "../generation_compute.hpp"
#include "../transformer_kernels.hpp"

namespace shardscope::lowering {
namespace {

void set_pass(Op& op, const PassCompute& pass) {
  op.flops = pass.flops;
  op.attention_flops = pass.attention_flops;
  op.bytes = pass.memory_bytes;
  op.kernels = pass.kernels;
}

/// Whether a compute op calls cuBLAS: it has a GEMM, or it has FLOPs but no kernels to say.
bool runs_gemms(const Schedule& s, const Op& op) {
  if (op.kernels == kNone) return op.flops > 0;
  const auto kernels = op_kernels(s, op);
  return std::any_of(kernels.begin(), kernels.end(),
                     [](const Kernel& k) { return k.kind() == KernelKind::gemm; });
}

}  // namespace

Lowerer::Lowerer(const Scenario& scenario) : s_(scenario), b_(scenario.model.name) {
  layouts_ = param_groups(s_);
  compute_ = group_compute(s_, layouts_);
  // The passes of compute_.parts index these; lowering needs only the indices from here on.
  b_.schedule().kernel_sets = std::move(compute_.kernel_sets);
  part_first_.reserve(compute_.groups.size() + 1);
  part_first_.push_back(0);
  for (const auto& c : compute_.groups) part_first_.push_back(part_first_.back() + c.part_count);
  part_label_index_.assign(part_first_.back(), -1);
  const auto& mp = s_.fsdp.mixed_precision;
  param_dtype_ = mp.param_dtype.value_or(orig_dtype_);
  reduce_dtype_ = mp.reduce_dtype.value_or(param_dtype_);
  // FSDP1's keep_low_precision_grads: gradients stay in the dtype they were reduced in instead
  // of being upcast to the parameters' (MixedPrecision's docstring, _cast_grad_to_param_dtype).
  grad_dtype_ =
      s_.fsdp.api == FsdpApi::fsdp1 && mp.keep_low_precision_grads ? reduce_dtype_ : orig_dtype_;
  offload_ = s_.fsdp.cpu_offload.params;
}

bool Lowerer::sync_gradients() const {
  return s_.fsdp.requires_gradient_sync == SyncSchedule::every_microbatch || last_microbatch();
}

int Lowerer::domains_spanned(int ranks) const {
  const int per_domain = s_.cluster.gpus_per_nvlink_domain();
  return std::max(1, (ranks + per_domain - 1) / per_domain);
}

const Lowerer::PartLabels& Lowerer::part_labels(int g, std::size_t p) {
  int& index = part_label_index_[part_slot(g, p)];
  if (index >= 0) return part_labels_[static_cast<std::size_t>(index)];
  const ComputePart& part = compute_.parts_of(static_cast<std::size_t>(g))[p];
  // "<part>.forward_workspace.<i>": built by hand, a format call each cost more than the rest.
  // Parts of one label may have more workspace tensors than the first one seen (every_N: the
  // groups with a checkpointed block), so the list grows to the largest.
  std::string text;
  const auto workspace_labels = [&](std::string_view kind, std::size_t count,
                                    std::vector<std::int32_t>& out) {
    for (std::size_t i = out.size(); i < count; ++i) {
      text.assign(part.label).append(kind).push_back(static_cast<char>('0' + i % 10));
      out.push_back(b_.label(text));
    }
  };
  const auto complete = [&](PartLabels& l) -> const PartLabels& {
    workspace_labels(".forward_workspace.", part.forward_workspace.size(), l.forward_workspace);
    workspace_labels(".backward_workspace.", part.backward_workspace.size(), l.backward_workspace);
    for (std::size_t i = l.recomputed_tensors.size(); i < part.recompute_tensors.size(); ++i)
      l.recomputed_tensors.push_back(b_.label(part.label + ".recomputed." + std::to_string(i)));
    return l;
  };
  for (std::size_t i = 0; i < part_labels_.size(); ++i) {
    if (part_labels_[i].part == part.label) {
      index = static_cast<int>(i);
      return complete(part_labels_[i]);
    }
  }
  index = static_cast<int>(part_labels_.size());
  PartLabels l;
  l.part = part.label;
  l.saved = b_.label(part.label + ".saved");
  l.recomputed = b_.label(part.label + ".recomputed");
  l.weight_casts = b_.label(part.label + ".autocast_casts");
  l.output = b_.label(part.label + ".output");
  l.grad_input = b_.label(part.label + ".grad_input");
  part_labels_.push_back(std::move(l));
  return complete(part_labels_.back());
}

void Lowerer::plan_groups() {
  const std::size_t groups = layouts_.size();
  for (auto* list : {&ids_, &outside_, &children_, &post_forward_order_, &sharded_params_})
    list->reserve(groups);
  b_.schedule().groups.reserve(groups);
  for (std::size_t i = 0; i < groups; ++i) {
    const auto& l = layouts_[i];
    ParamGroup pg;
    pg.name = l.name;
    pg.numel = l.numel;
    pg.sharded_numel = l.sharded_numel;
    pg.dtype = orig_dtype_;
    pg.is_root = l.is_root;
    ids_.push_back(b_.add_group(std::move(pg)));
    if (l.is_root) root_ = static_cast<int>(i);
  }
  for (int i = 0; i < static_cast<int>(layouts_.size()); ++i) {
    if (i < root_) outside_.push_back(i);
    if (i > root_) children_.push_back(i);
  }
  for (int c : children_) {
    if (has_params(c)) post_forward_order_.push_back(c);
  }
  if (has_params(root_)) post_forward_order_.push_back(root_);  // the root's post-forward runs last
  saved_.assign(part_first_.back(), kNone);
  sharded_grads_.assign(layouts_.size(), kNone);
  for (int g = 0; g < static_cast<int>(layouts_.size()); ++g) {
    BufferId id = kNone;
    if (has_params(g)) {
      id = b_.add_buffer(BufferName{b_.label("sharded_params"), true},
                         elems(layout(g).sharded_numel, orig_dtype_), orig_dtype_,
                         BufferCategory::sharded_params, gid(g),
                         offload_ ? Location::host : Location::gpu, true);
    }
    sharded_params_.push_back(id);
  }
}

Schedule Lowerer::run() {
  auto& sched = b_.schedule();
  // At most about 24 ops and 14 buffers per group and micro-batch (the examples reach 20 and 13)
  // besides the parts' tensors (workspaces, a checkpointed block's recomputed tensors), and a
  // sharded parameter buffer per group: reserve before the first is added, not regrow.
  const auto steps = static_cast<std::size_t>(s_.training.iterations * s_.training.grad_accum);
  std::size_t tensors = 0;
  for (const ComputePart& part : compute_.parts)
    tensors += part.forward_workspace.size() + part.backward_workspace.size() +
               part.recompute_tensors.size();
  sched.ops.reserve(steps * layouts_.size() * 24 + 64);
  sched.buffers.reserve(steps * (layouts_.size() * 14 + tensors) + layouts_.size() + 64);
  plan_groups();
  cpu_ = b_.add_stream("cpu", StreamKind::cpu);
  compute_stream_ = b_.add_stream("compute", StreamKind::compute);
  setup_streams_and_comms();
  sched.world_size = s_.cluster.world_size();
  sched.iterations = static_cast<int>(s_.training.iterations);
  sched.tokens_per_iteration = s_.training.tokens_per_microbatch() * s_.training.grad_accum;
  for (int it = 0; it < s_.training.iterations; ++it) {
    if (s_.training.generation.calls > 0) {
      b_.set_step(it, 0);
      b_.set_phase(Phase::generation);
      for (std::int64_t call = 0; call < s_.training.generation.calls; ++call) generation_call();
    }
    for (int mb = 0; mb < s_.training.grad_accum; ++mb) {
      b_.set_step(it, mb);
      b_.set_phase(Phase::forward);
      forward_pass();
      if (s_.training.synchronize == Synchronize::after_forward)
        synchronize_device("synchronize after forward");
      b_.set_phase(Phase::backward);
      backward_pass();
    }
    b_.set_phase(Phase::optimizer);
    optimizer_step();
    if (s_.training.synchronize == Synchronize::after_step)
      synchronize_device("synchronize after step");
    if (s_.fsdp.checkpoint.every > 0 && (it + 1) % s_.fsdp.checkpoint.every == 0) {
      b_.set_phase(Phase::checkpoint);
      checkpoint_state_dict();
    }
  }
  return b_.take();
}

void Lowerer::forward_pass() {
  for (int g : outside_) {
    for (std::size_t p = 0; p < compute_.parts_of(static_cast<std::size_t>(g)).size(); ++p)
      forward_part(g, p);
  }
  root_pre_forward();
  pre_forward(root_);
  const auto root_parts = compute_.parts_of(static_cast<std::size_t>(root_));
  for (std::size_t p = 0; p < root_parts.size(); ++p) {
    if (root_parts[p].position == ComputePosition::before_children) forward_part(root_, p);
  }
  for (int c : children_) {
    if (has_params(c)) pre_forward(c);
    for (std::size_t p = 0; p < compute_.parts_of(static_cast<std::size_t>(c)).size(); ++p)
      forward_part(c, p);
    if (has_params(c)) post_forward(c);
  }
  for (std::size_t p = 0; p < root_parts.size(); ++p) {
    if (in_root_forward_tail(root_parts[p])) forward_part(root_, p);
  }
  post_forward(root_);
  for (std::size_t p = 0; p < root_parts.size(); ++p) {
    if (!in_root_forward_tail(root_parts[p]) &&
        root_parts[p].position == ComputePosition::after_root)
      forward_part(root_, p);
  }
  clear_autocast_cache();  // the autocast region holds the model and the loss
}

void Lowerer::generation_call() {
  const GenerationSpec& gen = s_.training.generation;
  std::vector<BufferId> kv_caches(layouts_.size(), kNone);  // per group, for this call
  for (std::int64_t step = 0; step < gen.forwards_per_call(); ++step) {
    const GenerationForward f = generation_forward(s_, step);
    // Each forward is a root forward (the registered method's hooks wrap the first, the model's
    // own forward hooks every later one): FSDPState._root_pre_forward, then the groups' hooks.
    root_pre_forward();
    pre_forward(root_);
    generation_op(root_, f.embed, "embed", f.hidden, BufferCategory::activations);
    for (int c : children_) {
      if (has_params(c)) pre_forward(c);
      const std::int64_t blocks = layout(c).block_count;
      if (blocks > 0) {
        Op& op =
            generation_op(c, detail::repeated(f.block, blocks), step == 0 ? "prefill" : "decode",
                          f.hidden, BufferCategory::activations);
        // Its intermediates, freed as it goes (no_grad): held at most one block at a time.
        const BufferId transient =
            b_.add_buffer(buffer_name("generation_workspace"), f.block_transient, param_dtype_,
                          BufferCategory::workspace, gid(c));
        op.allocs.push_back(transient);
        op.frees.push_back(transient);
        // The KV cache: made by the prefill; a DynamicCache's grows by a new tensor per step
        // (torch.cat), a StaticCache is made once for every position.
        BufferId& cache = kv_caches[static_cast<std::size_t>(c)];
        if (cache == kNone || gen.kv_cache == KvCache::dynamic) {
          if (cache != kNone) op.frees.push_back(cache);
          const Bytes size = step == 0 ? prefill_cache_bytes(s_) : kv_cache_bytes(s_, f.keys);
          cache = b_.add_buffer(buffer_name("kv_cache"), blocks * size, param_dtype_,
                                BufferCategory::activations, gid(c));
          op.allocs.push_back(cache);
        } else {
          op.uses.push_back(cache);
        }
      }
      if (has_params(c)) post_forward(c);
    }
    generation_op(root_, f.head, "head", f.logits, BufferCategory::logits);
    post_forward(root_);
    Op& sampling = generation_op(root_, f.sampling, "sampling", 0, BufferCategory::logits);
    if (step + 1 == gen.forwards_per_call()) {
      // generate returns: its KV cache goes with it.
      for (BufferId cache : kv_caches) {
        if (cache != kNone) sampling.frees.push_back(cache);
      }
    }
  }
  after_generation_call();
}

Op& Lowerer::generation_op(int g, const KernelSet& kernels, std::string_view label, Bytes output,
                           BufferCategory category) {
  const KernelTotals totals = kernel_set_totals(kernels);
  const std::int32_t set = b_.kernel_set(kernels);
  Op& op = b_.add_op(OpKind::forward, compute_stream_, gid(g));
  op.flops = totals.flops;
  op.attention_flops = totals.attention_flops;
  op.bytes = totals.memory_bytes;
  op.kernels = set;
  op.label = b_.op_label(label);
  if (BufferId params = unsharded_params(g); params != kNone) op.uses.push_back(params);
  for (BufferId b : handed_on_) op.frees.push_back(b);
  handed_on_ = {};
  if (output > 0) {
    const BufferId out = b_.add_buffer(buffer_name(fmt::format("{}.output", label)), output,
                                       param_dtype_, category, gid(g));
    op.allocs.push_back(out);
    handed_on_.push_back(out);
  }
  add_cublas_workspace(op);
  return op;
}

void Lowerer::backward_pass() {
  // Post-backward hooks in the order autograd runs them: a group's hook runs after the backward
  // compute of the group post_backward_after names (itself unless the API defers it), after
  // that group's own hook.
  std::vector<int> waiting;
  const auto finish = [&](int after) {
    if (has_params(after) && post_backward_after(after) == after && after != root_)
      post_backward(after);
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (post_backward_after(*it) != after) {
        ++it;
        continue;
      }
      post_backward(*it);
      it = waiting.erase(it);
    }
  };
  const auto root_parts = compute_.parts_of(static_cast<std::size_t>(root_));
  for (std::size_t p = root_parts.size(); p-- > 0;) {
    if (!in_root_forward_tail(root_parts[p]) &&
        root_parts[p].position == ComputePosition::after_root)
      backward_part(root_, p);
  }
  pre_backward(root_);
  for (std::size_t p = root_parts.size(); p-- > 0;) {
    if (in_root_forward_tail(root_parts[p])) backward_part(root_, p);
  }
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    const int c = *it;
    if (has_params(c)) pre_backward(c);
    const auto parts = compute_.parts_of(static_cast<std::size_t>(c));
    for (std::size_t p = parts.size(); p-- > 0;) backward_part(c, p);
    if (has_params(c) && post_backward_after(c) != c) waiting.push_back(c);
    finish(c);
  }
  for (std::size_t p = root_parts.size(); p-- > 0;) {
    if (root_parts[p].position == ComputePosition::before_children) backward_part(root_, p);
  }
  finish(root_);
  for (int g : waiting) post_backward(g);  // deferred past every compute: at the end
  post_backward(root_);
  finalize_backward();
  for (auto it = outside_.rbegin(); it != outside_.rend(); ++it) {
    const auto parts = compute_.parts_of(static_cast<std::size_t>(*it));
    for (std::size_t p = parts.size(); p-- > 0;) backward_part(*it, p);
  }
}

void Lowerer::forward_part(int g, std::size_t p) {
  const ComputePart& part = compute_.parts_of(static_cast<std::size_t>(g))[p];
  Op& op = b_.add_op(OpKind::forward, compute_stream_, gid(g));
  set_pass(op, part.forward);
  op.fixed_time = part.forward_time;
  op.label = b_.op_label(part.label);
  if (BufferId params = unsharded_params(g); params != kNone) op.uses.push_back(params);
  if (part.saved_bytes > 0) {
    BufferId& saved = saved_[part_slot(g, p)];
    saved = b_.add_buffer(b_.step_name(part_labels(g, p).saved), part.saved_bytes, param_dtype_,
                          part.saved_category, gid(g));
    op.allocs.push_back(saved);
  }
  add_workspace(g, part_labels(g, p).forward_workspace, part.forward_workspace, op);
  hand_on(g, p, part.forward_output, BufferCategory::logits,
          part.input_becomes_grad ? Input::keep
          : part.passes_input_on  ? Input::pass_on
                                  : Input::free,
          op);
  add_cublas_workspace(op);
  if (part.weight_casts > 0) {
    // Autocast caches the casts of leaf parameters until its context exits: FSDP2's unsharded
    // parameters are such leaves, all of them held; FSDP1's are views of the flat parameter, cast
    // per use and freed after it, one projection's at a time.
    const bool cached = s_.fsdp.api == FsdpApi::fsdp2;
    const BufferId casts = b_.add_buffer(b_.step_name(part_labels(g, p).weight_casts),
                                         cached ? part.weight_casts : part.largest_weight_cast,
                                         param_dtype_, BufferCategory::activations, gid(g));
    op.allocs.push_back(casts);
    if (cached) {
      autocast_cache_.push_back(casts);
    } else {
      op.frees.push_back(casts);
    }
  }
}

void Lowerer::hand_on(int g, std::size_t p, Bytes output, BufferCategory category, Input input,
                      Op& op) {
  // The op reads what the part before it handed on, then frees it (allocations come first),
  // keeps it to write its gradient into, or hands it on with its own output.
  IdList received = std::move(handed_on_);
  handed_on_ = {};
  if (input == Input::pass_on) {
    handed_on_ = std::move(received);
  } else {
    for (BufferId b : received) {
      if (input == Input::keep) {
        kept_input_ = b;
      } else {
        op.frees.push_back(b);
      }
    }
  }
  if (output <= 0) return;
  const bool forward = op.kind == OpKind::forward;
  const PartLabels& labels = part_labels(g, p);
  const BufferId out = b_.add_buffer(b_.step_name(forward ? labels.output : labels.grad_input),
                                     output, param_dtype_, category, gid(g));
  op.allocs.push_back(out);
  handed_on_.push_back(out);
}

void Lowerer::cast_handed_on(int g, DType from, DType to, std::string_view label) {
  if (handed_on_.empty()) return;
  Bytes input = 0;
  for (BufferId b : handed_on_) input += b_.schedule().buffers[static_cast<std::size_t>(b)].size;
  const std::int64_t numel = input / bytes_per_element(from);
  const bool forward = forward_phase();
  Op& op = b_.add_op(forward ? OpKind::forward : OpKind::backward, compute_stream_, gid(g));
  op.label = b_.op_label(label);
  // aten::_to_copy: one kernel reading `from` and writing `to` per element (dtype_conversion).
  const KernelSet cast{{std::string(label), 1, dtype_conversion(numel, from, to)}};
  op.bytes = kernel_set_totals(cast).memory_bytes;
  op.kernels = b_.kernel_set(cast);
  op.frees = std::move(handed_on_);
  handed_on_ = {};
  const BufferId out =
      b_.add_buffer(buffer_name(forward ? "output_cast" : "output_cast.grad"), elems(numel, to), to,
                    forward ? BufferCategory::logits : BufferCategory::workspace, gid(g));
  op.allocs.push_back(out);
  handed_on_.push_back(out);
}

void Lowerer::clear_autocast_cache() {
  if (autocast_cache_.empty()) return;
  // The loss is the last op inside the autocast region (forward and loss run under it).
  Op& last = b_.op(b_.last_op());
  last.frees.insert(last.frees.end(), autocast_cache_.begin(), autocast_cache_.end());
  autocast_cache_.clear();
}

void Lowerer::backward_part(int g, std::size_t p) {
  const ComputePart& part = compute_.parts_of(static_cast<std::size_t>(g))[p];
  const BufferId params = unsharded_params(g);
  IdList recomputed;  // the recompute's tensors, which the backward frees
  if (part.recompute.flops > 0 || part.recompute_bytes > 0) {
    Op& re = b_.add_op(OpKind::recompute, compute_stream_, gid(g));
    set_pass(re, part.recompute);
    re.label = b_.op_label(part.label);
    if (params != kNone) re.uses.push_back(params);
    if (!part.recompute_tensors.empty()) {
      const std::vector<std::int32_t>& labels = part_labels(g, p).recomputed_tensors;
      const auto tensors = static_cast<std::uint32_t>(part.recompute_tensors.size());
      re.allocs.reserve(tensors + 1);  // and the cuBLAS workspace
      recomputed.reserve(tensors);
      for (std::size_t i = 0; i < part.recompute_tensors.size(); ++i) {
        const BufferId tensor = b_.add_buffer(b_.step_name(labels[i]), part.recompute_tensors[i],
                                              param_dtype_, BufferCategory::recompute, gid(g));
        re.allocs.push_back(tensor);
        recomputed.push_back(tensor);
      }
    } else if (part.recompute_bytes > 0) {
      recomputed.push_back(b_.add_buffer(b_.step_name(part_labels(g, p).recomputed),
                                         part.recompute_bytes, param_dtype_,
                                         BufferCategory::recompute, gid(g)));
      re.allocs.push_back(recomputed.back());
    }
    add_cublas_workspace(re);
  }
  Op& op = b_.add_op(OpKind::backward, compute_stream_, gid(g));
  set_pass(op, part.backward);
  op.fixed_time = part.backward_time;
  op.label = b_.op_label(part.label);
  if (params != kNone) op.uses.push_back(params);
  if (BufferId& saved = saved_[part_slot(g, p)]; saved != kNone) {
    op.frees.push_back(saved);
    saved = kNone;
  }
  op.frees.reserve(static_cast<std::uint32_t>(recomputed.size() + part.backward_workspace.size()) +
                   2);
  for (BufferId tensor : recomputed) op.frees.push_back(tensor);
  if (has_params(g)) on_backward_op(g, p, part.param_numel, op);
  add_workspace(g, part_labels(g, p).backward_workspace, part.backward_workspace, op);
  if (part.input_becomes_grad) {
    // The kept forward input now holds its gradient: handed back to the part before.
    handed_on_ = {kept_input_};
    kept_input_ = kNone;
  } else {
    hand_on(g, p, part.backward_output, BufferCategory::workspace, Input::free, op);
  }
  add_cublas_workspace(op);
}

void Lowerer::add_cublas_workspace(Op& op) {
  // PyTorch keeps one workspace per (cuBLAS handle, stream), allocated through the caching
  // allocator on first use (CublasHandlePool.cpp, setWorkspaceForHandle); handles are per
  // thread, and all compute runs on the default stream.
  const bool forward = op.kind == OpKind::forward;
  BufferId& workspace = forward ? cublas_forward_ : cublas_backward_;
  const Bytes size = s_.cluster.gpu.cublas_workspace;
  if (workspace != kNone || size <= 0 || !runs_gemms(b_.schedule(), op)) return;
  workspace = b_.add_buffer(
      BufferName{b_.label(forward ? "cublas_workspace.forward" : "cublas_workspace.autograd")},
      size, DType::fp32, BufferCategory::workspace, kNone);
  op.allocs.push_back(workspace);
}

OpId Lowerer::stream_wait(StreamId stream, OpId event, IdList frees, std::string_view label) {
  if (event == kNone) return kNone;
  Op& op = b_.add_op(OpKind::stream_wait, stream, kNone);
  op.deps.push_back(event);
  op.frees = std::move(frees);
  if (!label.empty()) op.label = b_.op_label(label);
  return b_.last_op();
}

void Lowerer::add_workspace(int g, const std::vector<std::int32_t>& labels,
                            const WorkspaceSizes& tensors, Op& op) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i] <= 0) continue;
    const BufferId ws = b_.add_buffer(b_.step_name(labels[i]), tensors[i], param_dtype_,
                                      BufferCategory::workspace, gid(g));
    op.allocs.push_back(ws);
    op.frees.push_back(ws);
  }
}

BufferId Lowerer::sharded_grad(int g, Op& op) {
  auto& grad = sharded_grads_[static_cast<std::size_t>(g)];
  if (grad == kNone) {
    grad = b_.add_buffer(BufferName{b_.label("sharded_grad"), true, b_.iteration()},
                         elems(layout(g).sharded_numel, grad_dtype_), grad_dtype_,
                         BufferCategory::sharded_grads, gid(g),
                         offload_ ? Location::host : Location::gpu);
    op.allocs.push_back(grad);
  } else {
    op.uses.push_back(grad);
  }
  return grad;
}

void Lowerer::optimizer_step() {
  // torch.optim over every sharded parameter, foreach (multi-tensor kernels, PyTorch's default
  // on CUDA) or fused; states are created lazily by the first step (Adam: exp_avg, exp_avg_sq;
  // SGD without momentum has none).
  const int states = optimizer_states_per_param(s_.training.optimizer);
  const StreamId stream = offload_ ? cpu_ : compute_stream_;
  Op step = make_op(OpKind::optimizer_step, stream, kNone);
  step.label = b_.op_label(to_string(s_.training.optimizer));
  std::int64_t shard_numel = 0;
  for (int g = 0; g < static_cast<int>(layouts_.size()); ++g) {
    if (!has_params(g)) continue;
    shard_numel += layout(g).sharded_numel;
    step.uses.push_back(sharded_params_[static_cast<std::size_t>(g)]);
    if (sharded_grads_[static_cast<std::size_t>(g)] != kNone)
      step.uses.push_back(sharded_grads_[static_cast<std::size_t>(g)]);
  }
  if (optimizer_states_.empty() && shard_numel > 0) {
    for (int i = 0; i < states; ++i) {
      optimizer_states_.push_back(b_.add_buffer(
          BufferName{b_.label(fmt::format("optimizer/state{}", i))},
          elems(shard_numel, orig_dtype_), orig_dtype_, BufferCategory::optimizer_states, kNone,
          offload_ ? Location::host : Location::gpu));
      step.allocs.push_back(optimizer_states_.back());
    }
  } else {
    step.uses.insert(step.uses.end(), optimizer_states_.begin(), optimizer_states_.end());
  }
  // Offloaded, the step runs on the CPU, priced by cluster.cpu.optimizer_bandwidth over one
  // pass's bytes whatever the implementation (PyTorch has no foreach kernels on the CPU).
  const OptimizerImpl impl = offload_ ? OptimizerImpl::fused : s_.training.optimizer_impl;
  if (shard_numel > 0 && states == 2 && impl == OptimizerImpl::foreach) {
    // _multi_tensor_adam keeps one fp32 temporary per parameter (sqrt of exp_avg_sq).
    const BufferId tmp = b_.add_buffer(
        BufferName{b_.label("optimizer/foreach_temp"), false, b_.iteration()},
        elems(shard_numel, orig_dtype_), orig_dtype_, BufferCategory::workspace, kNone);
    step.allocs.push_back(tmp);
    step.frees.push_back(tmp);
  }
  // One kernel set: the fused kernel, or the foreach passes (kernel.hpp).
  if (shard_numel > 0) {
    const KernelSet update{
        {std::string(to_string(s_.training.optimizer)), 1,
         OptimizerUpdate{shard_numel, s_.training.optimizer, orig_dtype_, impl}}};
    const KernelTotals totals = kernel_set_totals(update);
    step.bytes = totals.memory_bytes;
    step.flops = totals.flops;
    step.kernels = b_.kernel_set(update);
  }
  const OpId id = b_.emit(std::move(step));
  after_optimizer_step(id);
  // optimizer.zero_grad(set_to_none=True): sharded gradients are dropped.
  Op zero = make_op(OpKind::zero_grad, cpu_, kNone);
  for (auto& grad : sharded_grads_) {
    if (grad != kNone) zero.frees.push_back(grad);
    grad = kNone;
  }
  b_.emit(std::move(zero));
}

void Lowerer::synchronize_device(std::string_view label) {
  // torch.cuda.synchronize(): the CPU waits for the last op of every GPU stream.
  Op wait = make_op(OpKind::cpu_wait, cpu_, kNone);
  wait.label = b_.op_label(label);
  for (StreamId st = 0; st < static_cast<StreamId>(b_.schedule().streams.size()); ++st) {
    if (st != cpu_ && b_.last_on(st) != kNone) wait.deps.push_back(b_.last_on(st));
  }
  b_.emit(std::move(wait));
}

void Lowerer::checkpoint_state_dict() {
  const auto& ck = s_.fsdp.checkpoint;
  const int states = static_cast<int>(optimizer_states_.size());
  std::int64_t state_offset = 0;  // the group's first element in each optimizer state buffer
  for (int g = 0; g < static_cast<int>(layouts_.size()); ++g) {
    if (!has_params(g)) continue;
    const std::int64_t numel = layout(g).sharded_numel;
    state_offset += numel;
    if (ck.state_dict_type == StateDictType::full) {
      // FULL_STATE_DICT: every parameter (and optimizer state) is all-gathered in its original
      // dtype on the default stream, then copied to the host when offload_to_cpu (on rank 0 only
      // with rank0_only; this schedule is rank 0's).
      for (int k = 0; k <= states; ++k) {
        const Bytes full = elems(numel * world(), orig_dtype_);
        const BufferId buf = b_.add_buffer(
            buffer_name(k == 0 ? "full_state_dict" : fmt::format("full_optim_state{}", k - 1)),
            full, orig_dtype_, BufferCategory::workspace, gid(g));
        Op ag = make_op(OpKind::all_gather, compute_stream_, gid(g));
        ag.comm = 0;  // the shard communicator is always created first
        ag.bytes = full;
        ag.label = b_.op_label(k == 0 ? "state_dict" : "optim_state_dict");
        ag.allocs.push_back(buf);
        if (!ck.offload_to_cpu) ag.frees.push_back(buf);
        if (k == 0) {
          ag.input = b_.first(sharded_params_[static_cast<std::size_t>(g)], numel);
        } else {
          ag.input = b_.first(optimizer_states_[static_cast<std::size_t>(k - 1)], numel);
          ag.input.offset = elems(state_offset - numel, orig_dtype_);
        }
        ag.uses.push_back(ag.input.buffer);
        ag.output = b_.whole(buf);
        b_.emit(std::move(ag));
        if (ck.offload_to_cpu) {
          // To the state dict's host tensors, which the schedule does not hold: no output named.
          Op d2h = make_op(OpKind::d2h, compute_stream_, gid(g));
          d2h.bytes = full;
          d2h.label = b_.op_label("state_dict");
          d2h.uses.push_back(buf);
          d2h.frees.push_back(buf);
          d2h.input = b_.whole(buf);
          b_.emit(std::move(d2h));
        }
      }
    } else if (ck.offload_to_cpu) {
      Op d2h = make_op(OpKind::d2h, compute_stream_, gid(g));
      d2h.bytes = elems(numel, orig_dtype_) * (1 + states);
      d2h.label = b_.op_label("state_dict");
      d2h.uses.push_back(sharded_params_[static_cast<std::size_t>(g)]);
      b_.emit(std::move(d2h));
    }
  }
  // Writing the state dict waits for the device (tensor.cpu() synchronises).
  Op wait = make_op(OpKind::state_dict, cpu_, kNone);
  wait.label = b_.op_label(to_string(ck.state_dict_type));
  if (const OpId last = b_.last_on(compute_stream_); last != kNone) wait.deps.push_back(last);
  b_.emit(std::move(wait));
}

}  // namespace shardscope::lowering
