#pragma once
// The Plan tab: `shardscope plan` on the current scenario (in the background, with progress and
// Stop), its ranking as a table, a chosen configuration loaded into the settings (the exact
// scenario the planner simulated), and the chosen plan saved as code (plan --emit).

#include <QWidget>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/sim/planner.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
QT_END_NAMESPACE

namespace shardscope::gui {

class PlanView : public QWidget {
  Q_OBJECT

 public:
  /// `base` returns the scenario tree (with the current settings) and its file.
  using BaseProvider = std::function<std::pair<ConfigTree, std::string>()>;
  explicit PlanView(BaseProvider base, QWidget* parent = nullptr);
  ~PlanView() override;

  /// Sets the inputs as a user would (tests, screenshots). `target`: "either", "fsdp2", "fsdp1"
  /// or "torchtitan"; `knobs`: "key=value" (pin) or "key=v1,v2" (allow) per line.
  void set_inputs(const QString& target, const QString& knobs, const QString& margin, int top);
  /// Plans now, on this thread (tests, screenshots).
  void run_now();
  const sim::PlanResult* result() const { return result_ ? &*result_ : nullptr; }
  /// The selected row's whole configuration, as shown under the table.
  QString detail_text() const;
  /// The tree of ranked configuration `rank` (0-based): the base with its settings applied.
  ConfigTree configuration(std::size_t rank) const;
  /// Loads ranked configuration `rank` into the settings (emits load_configuration).
  void load(std::size_t rank);

 signals:
  void load_configuration(ConfigTree tree, QString description);

 private:
  struct Prepared {
    ConfigTree tree;
    std::string file;
    sim::PlanSpace space;
    sim::PlanOptions options;
  };
  std::optional<Prepared> prepare();
  void start_plan();
  void show_plan(Prepared prepared, sim::PlanResult result);
  void save_code();
  void show_detail();  // the selected row's configuration under the table
  int selected_rank() const;

  BaseProvider base_;
  QComboBox* target_;
  QLineEdit* batch_;
  QLineEdit* margin_;
  QSpinBox* top_;
  QPlainTextEdit* knobs_;
  QPushButton* run_;
  QPushButton* load_;
  QPushButton* save_;
  QProgressBar* progress_;
  QLabel* status_;
  QTableWidget* table_;
  QLabel* detail_;  // the selected row's whole configuration (the table's column elides it)
  // The plan shown: what it searched and what it found.
  ConfigTree tree_;
  std::string file_;
  sim::PlanSpace space_;
  std::optional<sim::PlanResult> result_;
  std::thread worker_;
  std::atomic<bool> cancel_{false};
};

}  // namespace shardscope::gui
