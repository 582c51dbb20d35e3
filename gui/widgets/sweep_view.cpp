#include "sweep_view.hpp"

#include <fmt/format.h>

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include "chart_axes.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope::gui {

SweepView::SweepView(BaseProvider base, QWidget* parent)
    : QWidget(parent),
      base_(std::move(base)),
      grid_(new QPlainTextEdit),
      budget_(new QLineEdit("80GiB")),
      run_(new QPushButton("Run sweep")),
      progress_(new QProgressBar),
      status_(new QLabel),
      chart_(new QChartView(new QChart)),
      y_axis_(new QComboBox) {
  // Throughput is comparable across micro-batch sizes and is what the Pareto front ranks; step
  // time is not when the tokens per step differ.
  y_axis_->addItems({"tokens/s per GPU", "step time"});
  grid_->setPlainText(
      "fsdp.reshard_after_forward=true,false\ntraining.activation_checkpointing=selective_op,"
      "full\ntraining.micro_batch=1,2,4");
  grid_->setMaximumHeight(90);
  grid_->setToolTip("one axis per line: key=v1,v2,...");
  auto* load = new QPushButton("Load sweep CSV/JSON…");
  auto* controls = new QHBoxLayout;
  controls->addWidget(grid_, 3);
  auto* side = new QVBoxLayout;
  auto* budget_row = new QHBoxLayout;
  budget_row->addWidget(new QLabel("memory budget"));
  budget_row->addWidget(budget_);
  side->addLayout(budget_row);
  side->addWidget(run_);
  side->addWidget(load);
  side->addWidget(progress_);
  side->addWidget(y_axis_);
  controls->addLayout(side, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(status_);
  layout->addWidget(chart_, 1);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  chart_->chart()->setTitle("step time vs peak reserved memory");
  connect(run_, &QPushButton::clicked, this, [this] { start_sweep(); });
  connect(load, &QPushButton::clicked, this, [this] { load_json(); });
  connect(y_axis_, &QComboBox::currentIndexChanged, this,
          [this] { set_rows(rows_, budget_value_); });
}

SweepView::~SweepView() {
  cancel_ = true;
  if (worker_.joinable()) worker_.join();
}

void SweepView::set_grid(const QString& lines, const QString& budget) {
  grid_->setPlainText(lines);
  budget_->setText(budget);
}

std::optional<std::pair<std::vector<sim::SweepAxis>, std::optional<Bytes>>>
SweepView::parse_inputs() {
  std::vector<Problem> problems;
  std::vector<sim::SweepAxis> axes;
  for (const auto& line : grid_->toPlainText().split('\n', Qt::SkipEmptyParts)) {
    if (auto axis = sim::parse_sweep_axis(line.trimmed().toStdString(), problems))
      axes.push_back(std::move(*axis));
  }
  std::optional<Bytes> budget;
  if (!budget_->text().trimmed().isEmpty()) {
    budget = parse_bytes(budget_->text().trimmed().toStdString());
    if (!budget)
      problems.push_back(
          {"memory budget", budget_->text().toStdString(), "not a size", "e.g. 80GiB"});
  }
  if (axes.empty() && problems.empty())
    problems.push_back({"grid", "", "no axis given", "key=v1,v2 per line"});
  if (!problems.empty()) {
    QStringList text;
    for (const auto& p : problems) text << QString::fromStdString(p.to_string());
    status_->setText(text.join("\n"));
    return std::nullopt;
  }
  return std::pair{std::move(axes), budget};
}

void SweepView::run_now() {
  auto inputs = parse_inputs();
  if (!inputs) return;
  auto [tree, file] = base_();
  sim::SweepOptions options;
  options.memory_budget = inputs->second;
  const auto points = sim::sweep(tree, file, inputs->first, options);
  set_rows(sweep_rows(inputs->first, points), inputs->second);
}

void SweepView::start_sweep() {
  if (worker_.joinable()) {
    cancel_ = true;  // a second click stops the running sweep
    worker_.join();
    cancel_ = false;
    run_->setText("Run sweep");
    return;
  }
  auto inputs = parse_inputs();
  if (!inputs) return;
  auto [tree, file] = base_();
  std::size_t total = 1;
  for (const auto& a : inputs->first) total *= a.values.size();
  progress_->setRange(0, static_cast<int>(total));
  progress_->setValue(0);
  run_->setText("Stop");
  status_->setText(QString("simulating %1 configurations on all cores…").arg(total));
  worker_ = std::thread([this, axes = inputs->first, budget = inputs->second,
                         tree = std::move(tree), file = std::move(file)] {
    sim::SweepOptions options;
    options.memory_budget = budget;
    options.cancel = &cancel_;
    options.progress = [this](std::size_t done, std::size_t) {
      QMetaObject::invokeMethod(
          progress_, [this, done] { progress_->setValue(static_cast<int>(done)); },
          Qt::QueuedConnection);
    };
    std::vector<SweepRow> rows;
    QString error;
    try {
      rows = sweep_rows(axes, sim::sweep(tree, file, axes, options));
    } catch (const std::exception& e) {
      error = QString::fromUtf8(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, rows = std::move(rows), budget, error]() mutable {
          if (worker_.joinable()) worker_.join();
          run_->setText("Run sweep");
          if (!error.isEmpty()) {
            status_->setText(error);
            return;
          }
          set_rows(std::move(rows), budget);
        },
        Qt::QueuedConnection);
  });
}

void SweepView::load_json() {
  const QString path =
      QFileDialog::getOpenFileName(this, "Load sweep", {}, "Sweep results (*.csv *.json)");
  if (path.isEmpty()) return;
  try {
    const std::string text = read_text_file(path.toStdString());
    auto rows = path.endsWith(".csv") ? sweep_rows_from_csv(text, path.toStdString())
                                      : sweep_rows_from_json(text, path.toStdString());
    set_rows(std::move(rows), parse_bytes(budget_->text().toStdString()));
  } catch (const Error& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
}

QChart* SweepView::scatter() const {
  return chart_->chart();
}

void SweepView::set_rows(std::vector<SweepRow> rows, std::optional<Bytes> budget) {
  rows_ = std::move(rows);
  budget_value_ = budget;
  const bool throughput = y_axis_->currentIndex() == 0;
  auto y_of = [throughput](const SweepRow& r) {
    return throughput ? r.tokens_per_s_per_gpu : r.step_time_s;
  };
  QChart* c = chart_->chart();
  c->removeAllSeries();
  for (auto* axis : c->axes()) {
    c->removeAxis(axis);  // hands the axis back: delete it
    delete axis;
  }
  auto* x = new QValueAxis;
  auto* y = new QValueAxis;
  Bytes top = budget.value_or(1);
  for (const auto& r : rows_) {
    if (r.error.empty()) top = std::max(top, r.peak_reserved);
  }
  const MemoryUnit unit = memory_unit_for(top);
  x->setTitleText(QString("peak reserved memory (%1)").arg(unit.name));
  y->setTitleText(throughput ? "tokens/s per GPU" : "step time (s)");
  c->setTitle(throughput ? "throughput vs peak reserved memory"
                         : "step time vs peak reserved memory");
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  auto series = [&](const QString& name, QColor color, double size) {
    auto* s = new QScatterSeries;
    s->setName(name);
    s->setColor(color);
    s->setMarkerSize(size);
    c->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
    connect(s, &QScatterSeries::clicked, this, [this, y_of, unit](const QPointF& p) {
      // The nearest configuration to the click loads into the settings.
      const SweepRow* best = nullptr;
      double best_d = 1e300;
      for (const auto& r : rows_) {
        if (!r.error.empty()) continue;
        const double dx = (unit.of(r.peak_reserved) - p.x()) / std::max(1.0, p.x()),
                     dy = (y_of(r) - p.y()) / std::max(1e-9, std::abs(p.y()));
        if (dx * dx + dy * dy < best_d) {
          best_d = dx * dx + dy * dy;
          best = &r;
        }
      }
      if (best) {
        status_->setText(QString::fromStdString("loaded " + best->label()));
        emit load_settings(best->settings);
      }
    });
    return s;
  };
  // Drawn in this order, so a configuration that does not fit shows over the others: one that ran
  // out of memory sits at the capacity, often beside one that fits.
  auto* fits = series("fits", QColor(66, 133, 244), 9);
  auto* pareto = series("Pareto front", QColor(219, 68, 55), 13);
  auto* over = series("does not fit", QColor(110, 110, 110), 8);
  over->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  double max_x = 0, max_y = 0;
  int n_fit = 0, n_pareto = 0, n_over = 0;
  for (const auto& r : rows_) {
    if (!r.error.empty()) continue;
    const QPointF p(unit.of(r.peak_reserved), y_of(r));
    (r.fits ? fits : over)->append(p);
    if (r.pareto) pareto->append(p);
    n_fit += r.fits;
    n_over += !r.fits;
    n_pareto += r.pareto;
    max_x = std::max(max_x, p.x());
    max_y = std::max(max_y, p.y());
  }
  fits->setName(QString("fits (%1)").arg(n_fit));
  over->setName(QString("does not fit (%1)").arg(n_over));
  pareto->setName(QString("Pareto front (%1)").arg(n_pareto));
  if (budget) {
    auto* line = new QLineSeries;
    line->setName(QString::fromStdString("budget " + format_bytes(*budget)));
    const double b = unit.of(*budget);
    line->append(b, 0);
    line->append(b, max_y * 1.05);
    line->setPen(QPen(QColor(200, 0, 0), 2, Qt::DashLine));
    c->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
    max_x = std::max(max_x, b);
  }
  set_round_ticks(x, max_x);
  set_round_ticks(y, max_y);
  status_->setText(
      QString("%1 configurations, %2 fit, %3 on the Pareto front — click a point to load it")
          .arg(rows_.size())
          .arg(n_fit)
          .arg(n_pareto));
  progress_->setValue(progress_->maximum());
}

}  // namespace shardscope::gui
