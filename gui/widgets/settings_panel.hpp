#pragma once
// The scenario keys the key table labels (ScenarioKey::label: presets, nodes × GPUs, training
// settings, the FSDP knobs) as widgets, in the table's order: a boolean as a check box, an integer
// as a spin box over the key's range, anything else as a list of the values it offers. Knobs the
// user touched become `--set`-style overrides on the loaded scenario; knobs of the other FSDP API
// are disabled. Validation problems show inline.

#include <QLabel>
#include <QWidget>
#include <map>
#include <vector>

#include "shardscope/core/scenario.hpp"
#include "shardscope/core/scenario_keys.hpp"

QT_BEGIN_NAMESPACE
class QFormLayout;
QT_END_NAMESPACE

namespace shardscope::gui {

class SettingsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SettingsPanel(QWidget* parent = nullptr);

  /// Shows the scenario's values and forgets earlier edits.
  void load(const Scenario& scenario);
  /// Hides the knobs and says why (no scenario yet, or a timeline file whose settings are not
  /// known), so the panel never shows defaults that have nothing to do with what is drawn.
  void clear_scenario(const QString& note);
  bool has_scenario() const { return note_->isHidden(); }
  /// The edits, as "key=value" overrides (model and cluster presets included).
  std::vector<std::string> overrides() const;
  void show_problems(const QStringList& problems);
  /// Sets a knob as the user would (tests, scripted screenshots). Returns false for an unknown key.
  bool set_value(const std::string& key, const QString& value);

 signals:
  void changed();

 private:
  QWidget* add_widget(QFormLayout* form, const ScenarioKey& key);
  void show_value(const std::string& key, const QString& value);
  void touched(const std::string& key);
  void update_enabled();

  std::map<std::string, QWidget*> widgets_;
  std::map<std::string, bool> dirty_;
  QLabel* problems_ = nullptr;
  QLabel* note_ = nullptr;
  std::vector<QWidget*> groups_;
  bool loading_ = false;
};

}  // namespace shardscope::gui
