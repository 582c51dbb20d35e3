#include "plan_view.hpp"

#include <fmt/format.h>

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <chrono>
#include <filesystem>
#include <memory>

#include "shardscope/core/output_file.hpp"
#include "shardscope/core/time_left.hpp"
#include "shardscope/sim/plan_emit.hpp"
#include "shardscope/sim/sweep.hpp"

namespace shardscope::gui {
namespace {

const QStringList kColumns{"rank",     "step",       "tokens/s/GPU", "MFU",          "reserved",
                           "headroom", "bottleneck", "API",          "configuration"};

}  // namespace

PlanView::PlanView(BaseProvider base, QWidget* parent)
    : QWidget(parent),
      base_(std::move(base)),
      target_(new QComboBox),
      batch_(new QLineEdit),
      margin_(new QLineEdit("5%")),
      top_(new QSpinBox),
      knobs_(new QPlainTextEdit),
      run_(new QPushButton("Plan")),
      load_(new QPushButton("Load into settings")),
      save_(new QPushButton("Save as code…")),
      progress_(new QProgressBar),
      status_(new QLabel),
      table_(new QTableWidget),
      detail_(new QLabel) {
  target_->addItem("FSDP2 or FSDP1", "either");
  target_->addItem("FSDP2 (fully_shard)", "fsdp2");
  target_->addItem("FSDP1 (FullyShardedDataParallel)", "fsdp1");
  target_->addItem("torchtitan (its keys only)", "torchtitan");
  target_->setToolTip("which API the plan may use; torchtitan keeps to what its config can say");
  batch_->setPlaceholderText("the scenario's");
  batch_->setToolTip("the fixed global batch in tokens per optimizer step");
  margin_->setToolTip("the budget: the GPU's capacity less this (a percentage or a size)");
  top_->setRange(1, 100);
  top_->setValue(5);
  knobs_->setPlaceholderText(
      "pin a knob (key=value) or narrow it (key=v1,v2), one per line; the rest are searched");
  knobs_->setMaximumHeight(70);
  load_->setEnabled(false);
  save_->setEnabled(false);

  auto* inputs = new QHBoxLayout;
  auto* left = new QVBoxLayout;
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel("API"));
  row->addWidget(target_, 2);
  row->addWidget(new QLabel("global batch (tokens)"));
  row->addWidget(batch_, 1);
  row->addWidget(new QLabel("margin"));
  row->addWidget(margin_);
  row->addWidget(new QLabel("top"));
  row->addWidget(top_);
  left->addLayout(row);
  left->addWidget(knobs_);
  inputs->addLayout(left, 3);
  auto* side = new QVBoxLayout;
  side->addWidget(run_);
  side->addWidget(progress_);
  inputs->addLayout(side, 1);
  auto* actions = new QHBoxLayout;
  actions->addWidget(status_, 1);
  actions->addWidget(load_);
  actions->addWidget(save_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(inputs);
  layout->addWidget(table_, 1);
  layout->addWidget(detail_);
  layout->addLayout(actions);
  detail_->setWordWrap(true);
  detail_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  table_->setColumnCount(static_cast<int>(kColumns.size()));
  table_->setHorizontalHeaderLabels(kColumns);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  status_->setWordWrap(true);
  connect(run_, &QPushButton::clicked, this, [this] { start_plan(); });
  connect(load_, &QPushButton::clicked, this, [this] {
    if (selected_rank() >= 0) load(static_cast<std::size_t>(selected_rank()));
  });
  connect(table_, &QTableWidget::cellDoubleClicked, this,
          [this](int clicked, int) { load(static_cast<std::size_t>(clicked)); });
  connect(save_, &QPushButton::clicked, this, [this] { save_code(); });
  connect(table_, &QTableWidget::itemSelectionChanged, this, [this] { show_detail(); });
}

QString PlanView::detail_text() const {
  return detail_->text();
}

void PlanView::show_detail() {
  const int rank = selected_rank();
  if (!result_ || rank < 0) {
    detail_->clear();
    return;
  }
  const auto& p = result_->ranked[static_cast<std::size_t>(rank)];
  std::string text = fmt::format("#{}: {}", rank + 1, sim::configuration_text(space_, p.config));
  if (p.members.size() > 1) text += fmt::format(" ({})", sim::entry_text(*result_, p));
  detail_->setText(QString::fromStdString(text));
}

PlanView::~PlanView() {
  cancel_ = true;
  if (worker_.joinable()) worker_.join();
}

void PlanView::set_inputs(const QString& target, const QString& knobs, const QString& margin,
                          int top) {
  target_->setCurrentIndex(std::max(0, target_->findData(target)));
  knobs_->setPlainText(knobs);
  margin_->setText(margin);
  top_->setValue(top);
}

std::optional<PlanView::Prepared> PlanView::prepare() {
  auto [tree, file] = base_();
  std::vector<Problem> problems;
  sim::PlanInputs inputs;
  const std::string target = target_->currentData().toString().toStdString();
  if (target == "torchtitan") {
    inputs.allowed = sim::emit_constraints(sim::EmitTarget::torchtitan);
  } else {
    inputs.api = target;
  }
  if (const auto text = batch_->text().trimmed(); !text.isEmpty()) {
    bool ok = false;
    inputs.global_batch_tokens = text.toLongLong(&ok);
    if (!ok)
      problems.push_back({"global batch", text.toStdString(), "not a number of tokens",
                          "e.g. 1048576, or empty for the scenario's"});
  }
  for (const auto& line : knobs_->toPlainText().split('\n', Qt::SkipEmptyParts)) {
    auto knob = sim::parse_key_values(line.trimmed().toStdString(), "knobs", problems);
    if (!knob) continue;
    if (knob->values.size() == 1) {
      inputs.fixed.emplace_back(std::move(knob->key), std::move(knob->values.front()));
    } else {
      inputs.allowed.emplace_back(std::move(knob->key), std::move(knob->values));
    }
  }
  try {
    throw_if_any(std::move(problems));
    sim::PlanBase base = sim::plan_base(std::move(tree), file, inputs);
    sim::PlanOptions options;
    std::vector<Problem> margin;  // `problems` was handed to throw_if_any above
    options.memory_budget =
        sim::budget_with_margin(sim::plan_capacity(base.scenario),
                                margin_->text().trimmed().toStdString(), "margin", margin);
    throw_if_any(std::move(margin));
    options.top = static_cast<std::size_t>(top_->value());
    return Prepared{std::move(base.tree), std::move(file), std::move(base.space),
                    std::move(options)};
  } catch (const Error& e) {
    status_->setText(QString::fromStdString(e.what()));
    return std::nullopt;
  }
}

void PlanView::run_now() {
  auto prepared = prepare();
  if (!prepared) return;
  auto result = sim::plan(prepared->tree, prepared->file, prepared->space, prepared->options);
  show_plan(std::move(*prepared), std::move(result));
}

void PlanView::start_plan() {
  if (worker_.joinable()) {
    cancel_ = true;  // a second click stops the running plan; what it ranked is shown
    return;
  }
  auto prepared = prepare();
  if (!prepared) return;
  const std::size_t total = prepared->space.size();
  progress_->setRange(0, static_cast<int>(std::min<std::size_t>(total, INT32_MAX)));
  progress_->setValue(0);
  run_->setText("Stop");
  status_->setText(QString("planning over %1 configurations on all cores…").arg(total));
  cancel_ = false;
  worker_ = std::thread([this, total, prepared = std::move(*prepared)]() mutable {
    prepared.options.cancel = &cancel_;
    // The time left as the CLI's line says it (TimeLeft), on the status line.
    prepared.options.progress =
        [this, total, time_left = std::make_shared<TimeLeft>(),
         start = std::chrono::steady_clock::now()](const sim::PlanProgress& at) {
          const double elapsed_s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const auto left =
              time_left->update(elapsed_s, at.seconds_done, at.seconds_total, at.estimated);
          const std::string phrase = time_left_phrase(elapsed_s, at.estimated, left);
          QString status = QString("planning over %1 configurations on all cores").arg(total) +
                           (phrase.empty() ? QString("…") : ": " + QString::fromStdString(phrase));
          const auto settled = at.settled;
          QMetaObject::invokeMethod(
              progress_,
              [this, settled, status] {
                progress_->setValue(static_cast<int>(settled));
                status_->setText(status);
              },
              Qt::QueuedConnection);
        };
    std::optional<sim::PlanResult> result;
    QString error;
    try {
      result = sim::plan(prepared.tree, prepared.file, prepared.space, prepared.options);
      sim::throw_if_none_valid(prepared.space, *result);  // why, rather than "nothing fits"
    } catch (const std::exception& e) {
      result.reset();
      error = QString::fromUtf8(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, prepared = std::move(prepared), result = std::move(result), error]() mutable {
          if (worker_.joinable()) worker_.join();
          run_->setText("Plan");
          if (!result) {
            status_->setText(error);
            return;
          }
          show_plan(std::move(prepared), std::move(*result));
        },
        Qt::QueuedConnection);
  });
}

void PlanView::show_plan(Prepared prepared, sim::PlanResult result) {
  tree_ = std::move(prepared.tree);
  file_ = std::move(prepared.file);
  space_ = std::move(prepared.space);
  result_ = std::move(result);
  const auto& r = *result_;
  table_->setRowCount(static_cast<int>(r.ranked.size()));
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& p = r.ranked[i];
    const auto& s = p.summary;
    const QStringList cells{
        QString::number(i + 1),
        QString::fromStdString(format_duration(s.step_time)),
        QString::number(s.tokens_per_s_per_gpu.value(), 'f', 0),
        QString::fromStdString(analysis::percent_text(s.mfu)),
        QString::fromStdString(format_bytes(s.peak_reserved.value())),
        QString::fromStdString(format_bytes(r.memory_budget - s.peak_reserved.value())),
        QString::fromStdString(p.bottleneck),
        QString::fromStdString(space_.parts[p.config.part].api),
        QString::fromStdString(sim::configuration_text(space_, p.config))};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c == cells.size() - 1) item->setToolTip(cells[c]);  // whole, under the table too
      table_->setItem(static_cast<int>(i), c, item);
    }
  }
  table_->resizeColumnsToContents();
  if (!r.ranked.empty()) table_->selectRow(0);
  load_->setEnabled(!r.ranked.empty());
  save_->setEnabled(!r.ranked.empty());
  progress_->setValue(progress_->maximum());
  status_->setText(QString::fromStdString(fmt::format(
      "{}{} configurations: {} simulated ({} fit), {} skipped by the step-time bound, {} as above "
      "one that did not fit, {} by their memory alone; budget {} — "
      "double-click a row to load it",
      r.cancelled ? "stopped: the ranking covers what was simulated. " : "", r.space, r.simulated,
      r.fitting, r.skipped_by_bound, r.skipped_by_memory, r.screened_by_memory,
      format_bytes(r.memory_budget))));
}

int PlanView::selected_rank() const {
  const auto rows = table_->selectionModel()->selectedRows();
  return rows.isEmpty() ? -1 : rows.front().row();
}

ConfigTree PlanView::configuration(std::size_t rank) const {
  return sim::configuration_tree(tree_, space_, result_->ranked.at(rank).index);
}

void PlanView::load(std::size_t rank) {
  if (!result_ || rank >= result_->ranked.size()) return;
  const auto& p = result_->ranked[rank];
  emit load_configuration(configuration(rank), QString::fromStdString(fmt::format(
                                                   "plan #{}: {} predicted, {} reserved", rank + 1,
                                                   format_duration(p.summary.step_time),
                                                   format_bytes(p.summary.peak_reserved.value()))));
}

void PlanView::save_code() {
  const int rank = selected_rank();
  if (!result_ || rank < 0) return;
  const auto& p = result_->ranked[static_cast<std::size_t>(rank)];
  const std::string api = space_.parts[p.config.part].api;
  const bool titan = target_->currentData().toString() == "torchtitan";
  const auto target = titan ? sim::EmitTarget::torchtitan : *sim::parse_emit_target(api);
  const QString path =
      QFileDialog::getSaveFileName(this, "Save the plan as code", titan ? "plan.toml" : "plan.py",
                                   titan ? "torchtitan config (*.toml)" : "Python (*.py)");
  if (path.isEmpty()) return;
  try {
    write_text_file_atomic(
        path.toStdString(),
        sim::emit_ranked(target, tree_, file_, space_, *result_, static_cast<std::size_t>(rank) + 1,
                         fmt::format("the GUI's Plan tab on {}", file_), path.toStdString()));
    status_->setText(QString("wrote %1 (plan #%2 as %3)")
                         .arg(path)
                         .arg(rank + 1)
                         .arg(QString::fromStdString(std::string(sim::to_string(target)))));
  } catch (const Error& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
}

}  // namespace shardscope::gui
