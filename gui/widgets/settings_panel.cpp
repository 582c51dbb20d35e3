#include "settings_panel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QSpinBox>
#include <QVBoxLayout>

#include "shardscope/core/model_presets.hpp"

namespace shardscope::gui {
namespace {

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
}

QString raf_text(const ReshardAfterForward& r) {
  if (r.mode == ReshardAfterForward::Mode::on) return "true";
  if (r.mode == ReshardAfterForward::Mode::off) return "false";
  return QString::number(r.size);
}

}  // namespace

SettingsPanel::SettingsPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  note_ = new QLabel(this);
  note_->setWordWrap(true);
  note_->setMargin(6);
  outer->addWidget(note_);
  auto group = [&](const QString& title) {
    auto* box = new QGroupBox(title, this);
    auto* form = new QFormLayout(box);
    outer->addWidget(box);
    groups_.push_back(box);
    return form;
  };
  QStringList models, clusters;
  for (const auto& p : model_presets()) models << qs(p.name);
  for (const auto& p : cluster_presets()) clusters << qs(p.name);
  auto* model = group("Model and cluster");
  add_combo(model, "model.preset", "model", models);
  add_combo(model, "cluster.preset", "GPU", clusters);
  add_spin(model, "cluster.nodes", "nodes", 1, 4096);
  add_spin(model, "cluster.gpus_per_node", "GPUs per node", 1, 16);
  auto* training = group("Training");
  add_spin(training, "training.seq_len", "sequence length", 16, 1 << 20);
  add_spin(training, "training.micro_batch", "micro-batch", 1, 1024);
  add_spin(training, "training.grad_accum", "gradient accumulation", 1, 1024);
  add_combo(training, "training.activation_checkpointing", "activation checkpointing",
            {"none", "selective_op", "full", "every_2", "every_4"});
  add_combo(training, "training.optimizer", "optimizer", {"adamw", "adam", "sgd"});
  add_combo(training, "training.loss", "loss", {"upcast_fp32", "fused", "chunked"});
  add_combo(training, "training.autocast", "autocast", {"none", "bf16", "fp16"});
  auto* fsdp = group("FSDP");
  add_combo(fsdp, "fsdp.api", "API", {"fsdp2", "fsdp1"});
  add_combo(fsdp, "fsdp.reshard_after_forward", "reshard_after_forward",
            {"true", "false", "2", "4", "8"});
  add_spin(fsdp, "fsdp.forward_prefetch_modules", "forward prefetch (groups)", 0, 8);
  add_spin(fsdp, "fsdp.backward_prefetch_modules", "backward prefetch (groups)", 0, 8);
  add_combo(fsdp, "fsdp.sharding_strategy", "sharding_strategy",
            {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"});
  add_combo(fsdp, "fsdp.backward_prefetch", "backward_prefetch",
            {"BACKWARD_PRE", "BACKWARD_POST", "none"});
  add_check(fsdp, "fsdp.forward_prefetch", "forward_prefetch");
  add_check(fsdp, "fsdp.limit_all_gathers", "limit_all_gathers");
  add_spin(fsdp, "fsdp.mesh.replicate", "HSDP replicas", 1, 4096);
  add_combo(fsdp, "fsdp.mixed_precision.param_dtype", "param dtype", {"fp32", "bf16", "fp16"});
  add_combo(fsdp, "fsdp.mixed_precision.reduce_dtype", "reduce dtype", {"fp32", "bf16", "fp16"});
  add_check(fsdp, "fsdp.cpu_offload.params", "CPU offload");
  add_spin(fsdp, "fsdp.wrap.blocks_per_group", "blocks per group", 1, 64);
  add_check(fsdp, "fsdp.separate_reduce_scatter_group", "separate reduce-scatter group");
  add_check(fsdp, "allocator.expandable_segments", "expandable segments");
  problems_ = new QLabel(this);
  problems_->setWordWrap(true);
  problems_->setStyleSheet("color: #b00020;");
  outer->addWidget(problems_);
  outer->addStretch(1);
  update_enabled();
  clear_scenario("Open a scenario (File → Open scenario…) to see and change its settings.");
}

void SettingsPanel::clear_scenario(const QString& note) {
  for (auto* g : groups_) g->setVisible(false);
  dirty_.clear();
  problems_->clear();
  note_->setText(note);
  note_->setVisible(true);
}

QComboBox* SettingsPanel::add_combo(QFormLayout* form, const std::string& key, const QString& label,
                                    const QStringList& values) {
  auto* w = new QComboBox(this);
  w->addItems(values);
  form->addRow(label, w);
  widgets_[key] = w;
  connect(w, &QComboBox::currentTextChanged, this, [this, key] { touched(key); });
  return w;
}

QSpinBox* SettingsPanel::add_spin(QFormLayout* form, const std::string& key, const QString& label,
                                  int min, int max) {
  auto* w = new QSpinBox(this);
  w->setRange(min, max);
  form->addRow(label, w);
  widgets_[key] = w;
  connect(w, &QSpinBox::valueChanged, this, [this, key] { touched(key); });
  return w;
}

QCheckBox* SettingsPanel::add_check(QFormLayout* form, const std::string& key,
                                    const QString& label) {
  auto* w = new QCheckBox(this);
  form->addRow(label, w);
  widgets_[key] = w;
  connect(w, &QCheckBox::toggled, this, [this, key] { touched(key); });
  return w;
}

void SettingsPanel::touched(const std::string& key) {
  if (loading_) return;
  dirty_[key] = true;
  update_enabled();
  emit changed();
}

bool SettingsPanel::set_value(const std::string& key, const QString& value) {
  auto it = widgets_.find(key);
  if (it == widgets_.end()) return false;
  if (auto* c = qobject_cast<QComboBox*>(it->second)) {
    if (c->findText(value) < 0) c->addItem(value);
    c->setCurrentText(value);
  } else if (auto* s = qobject_cast<QSpinBox*>(it->second)) {
    s->setValue(value.toInt());
  } else if (auto* b = qobject_cast<QCheckBox*>(it->second)) {
    b->setChecked(value == "true");
  }
  touched(key);
  return true;
}

void SettingsPanel::load(const Scenario& s) {
  loading_ = true;
  dirty_.clear();
  auto combo = [&](const std::string& key, const QString& v) {
    auto* c = qobject_cast<QComboBox*>(widgets_[key]);
    if (c->findText(v) < 0) c->addItem(v);
    c->setCurrentText(v);
  };
  auto spin = [&](const std::string& key, std::int64_t v) {
    qobject_cast<QSpinBox*>(widgets_[key])->setValue(static_cast<int>(v));
  };
  auto check = [&](const std::string& key, bool v) {
    qobject_cast<QCheckBox*>(widgets_[key])->setChecked(v);
  };
  combo("model.preset", qs(s.model.name));
  combo("cluster.preset", qs(s.cluster.name));
  spin("cluster.nodes", s.cluster.nodes);
  spin("cluster.gpus_per_node", s.cluster.gpus_per_node);
  spin("training.seq_len", s.training.seq_len);
  spin("training.micro_batch", s.training.micro_batch);
  spin("training.grad_accum", s.training.grad_accum);
  combo("training.activation_checkpointing",
        qs(to_string(s.training.activation_checkpointing, s.training.checkpoint_every)));
  combo("training.optimizer", qs(to_string(s.training.optimizer)));
  combo("training.loss", qs(to_string(s.training.loss)));
  combo("training.autocast",
        s.training.autocast ? qs(to_string(*s.training.autocast)) : QStringLiteral("none"));
  combo("fsdp.api", qs(to_string(s.fsdp.api)));
  combo("fsdp.reshard_after_forward", raf_text(s.fsdp.reshard_after_forward));
  spin("fsdp.forward_prefetch_modules", s.fsdp.forward_prefetch_modules);
  spin("fsdp.backward_prefetch_modules", s.fsdp.backward_prefetch_modules);
  combo("fsdp.sharding_strategy", qs(to_string(s.fsdp.sharding_strategy)));
  combo("fsdp.backward_prefetch", qs(to_string(s.fsdp.backward_prefetch)));
  check("fsdp.forward_prefetch", s.fsdp.forward_prefetch);
  check("fsdp.limit_all_gathers", s.fsdp.limit_all_gathers);
  spin("fsdp.mesh.replicate", s.fsdp.mesh_replicate);
  combo("fsdp.mixed_precision.param_dtype",
        qs(to_string(s.fsdp.mixed_precision.param_dtype.value_or(DType::fp32))));
  combo("fsdp.mixed_precision.reduce_dtype",
        qs(to_string(s.fsdp.mixed_precision.reduce_dtype.value_or(
            s.fsdp.mixed_precision.param_dtype.value_or(DType::fp32)))));
  check("fsdp.cpu_offload.params", s.fsdp.cpu_offload.params);
  spin("fsdp.wrap.blocks_per_group", s.fsdp.blocks_per_group);
  check("fsdp.separate_reduce_scatter_group", s.fsdp.separate_reduce_scatter_group);
  check("allocator.expandable_segments", s.allocator.expandable_segments);
  loading_ = false;
  problems_->clear();
  note_->setVisible(false);
  for (auto* g : groups_) g->setVisible(true);
  update_enabled();
}

void SettingsPanel::update_enabled() {
  const bool fsdp2 = qobject_cast<QComboBox*>(widgets_["fsdp.api"])->currentText() == "fsdp2";
  for (const char* key : {"fsdp.reshard_after_forward", "fsdp.forward_prefetch_modules",
                          "fsdp.backward_prefetch_modules", "fsdp.separate_reduce_scatter_group"}) {
    widgets_[key]->setEnabled(fsdp2);
  }
  for (const char* key : {"fsdp.sharding_strategy", "fsdp.backward_prefetch",
                          "fsdp.forward_prefetch", "fsdp.limit_all_gathers"}) {
    widgets_[key]->setEnabled(!fsdp2);
  }
}

std::vector<std::string> SettingsPanel::overrides() const {
  std::vector<std::string> out;
  for (const auto& [key, dirty] : dirty_) {
    QWidget* w = widgets_.at(key);
    if (!dirty || !w->isEnabled()) continue;
    QString value;
    if (auto* c = qobject_cast<QComboBox*>(w))
      value = c->currentText();
    else if (auto* s = qobject_cast<QSpinBox*>(w))
      value = QString::number(s->value());
    else if (auto* b = qobject_cast<QCheckBox*>(w))
      value = b->isChecked() ? "true" : "false";
    out.push_back(key + "=" + value.toStdString());
  }
  return out;
}

void SettingsPanel::show_problems(const QStringList& problems) {
  problems_->setText(problems.join("\n"));
}

}  // namespace shardscope::gui
