#include "settings_panel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <climits>

namespace shardscope::gui {
namespace {

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
}

// The panel's box for a key: by the table's top-level section.
QString group_title(std::string_view path) {
  const auto section = path.substr(0, path.find('.'));
  if (section == "model" || section == "cluster") return "Model and cluster";
  if (section == "training") return "Training";
  if (section == "variation") return "Ranks";
  return "FSDP";  // fsdp and allocator
}

int clamped(double bound) {
  return static_cast<int>(std::clamp(bound, 0.0, static_cast<double>(INT_MAX)));
}

}  // namespace

SettingsPanel::SettingsPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  note_ = new QLabel(this);
  note_->setWordWrap(true);
  note_->setMargin(6);
  outer->addWidget(note_);
  std::map<QString, QFormLayout*> forms;
  for (const auto& key : scenario_keys()) {
    if (key.label.empty()) continue;
    QFormLayout*& form = forms[group_title(key.path)];
    if (!form) {
      auto* box = new QGroupBox(group_title(key.path), this);
      form = new QFormLayout(box);
      outer->addWidget(box);
      groups_.push_back(box);
    }
    widgets_[std::string(key.path)] = add_widget(form, key);
  }
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

QWidget* SettingsPanel::add_widget(QFormLayout* form, const ScenarioKey& key) {
  const std::string path(key.path);
  QWidget* widget = nullptr;
  if (key.type == KeyType::boolean) {
    auto* w = new QCheckBox(this);
    connect(w, &QCheckBox::toggled, this, [this, path] { touched(path); });
    widget = w;
  } else if (key.type == KeyType::integer) {
    auto* w = new QSpinBox(this);
    w->setRange(clamped(key.min), clamped(key.max));
    connect(w, &QSpinBox::valueChanged, this, [this, path] { touched(path); });
    widget = w;
  } else {
    auto* w = new QComboBox(this);
    for (const auto& v : offered_values(key)) w->addItem(qs(v));
    connect(w, &QComboBox::currentTextChanged, this, [this, path] { touched(path); });
    widget = w;
  }
  widget->setToolTip(qs(key.models));
  form->addRow(qs(key.label), widget);
  return widget;
}

void SettingsPanel::show_value(const std::string& key, const QString& value) {
  QWidget* w = widgets_.at(key);
  if (auto* c = qobject_cast<QComboBox*>(w)) {
    if (c->findText(value) < 0) c->addItem(value);
    c->setCurrentText(value);
  } else if (auto* s = qobject_cast<QSpinBox*>(w)) {
    s->setValue(value.toInt());
  } else if (auto* b = qobject_cast<QCheckBox*>(w)) {
    b->setChecked(value == "true");
  }
}

void SettingsPanel::touched(const std::string& key) {
  if (loading_) return;
  dirty_[key] = true;
  update_enabled();
  emit changed();
}

bool SettingsPanel::set_value(const std::string& key, const QString& value) {
  if (!widgets_.contains(key)) return false;
  show_value(key, value);
  touched(key);
  return true;
}

void SettingsPanel::load(const Scenario& s) {
  loading_ = true;
  dirty_.clear();
  for (const auto& [path, widget] : widgets_)
    show_value(path, QString::fromStdString(key_of(path).value_of(s)));
  loading_ = false;
  problems_->clear();
  note_->setVisible(false);
  for (auto* g : groups_) g->setVisible(true);
  update_enabled();
}

void SettingsPanel::update_enabled() {
  const FsdpApi api = qobject_cast<QComboBox*>(widgets_.at("fsdp.api"))->currentText() == "fsdp2"
                          ? FsdpApi::fsdp2
                          : FsdpApi::fsdp1;
  for (const auto& [path, widget] : widgets_) widget->setEnabled(key_applies(key_of(path), api));
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
