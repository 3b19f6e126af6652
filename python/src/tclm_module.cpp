// tclm._tclm: Python bindings of the libtorch-free part of tclm (pybind11). The Python package
// python/tclm re-exports everything below; docs/python.md is the user documentation.
//
// Errors: tclm::Error thrown while loading a model becomes tclm.TclmError (a RuntimeError) with the
// library's message; bad arguments (shapes, sizes, options, unparsable lines given to parse_trace or
// featurize) raise ValueError; std::bad_alloc raises MemoryError. The GIL is released while the C++
// code runs, so several Python threads can predict, featurize or sample at the same time.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/infer.h"
#include "tclm/model_config.h"
#include "tclm/record.h"
#include "tclm/sample.h"
#include "tclm/weights.h"

#ifndef TCLM_VERSION_STRING
#define TCLM_VERSION_STRING "0.0.0"
#endif

namespace py = pybind11;

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

/// A loaded model: the engine plus what the weights file says about it.
struct PyEngine {
  tclm::CostModelEngine engine;
  std::string path;
  std::string model_kind;
  std::string config_json;
  std::string metadata_json;
  int64_t num_parameters = 0;
};

PyEngine load_engine(const std::string& path) {
  tclm::WeightsFile weights;
  {
    py::gil_scoped_release release;
    weights = tclm::load_weights(path);  // throws tclm::Error naming the file
  }
  tclm::CostModelEngine engine(weights, path);  // refuses another model kind or feature encoding
  std::string config = engine.config().to_json();
  return PyEngine{std::move(engine), path, weights.model_kind, std::move(config), weights.metadata_json,
                  weights.num_parameters()};
}

py::array_t<float> to_array(const std::vector<float>& v) {
  py::array_t<float> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(float));
  return out;
}

/// predict_lines: scores a snapshot of the engine (copies share the packed weights, so a copy is a
/// shared_ptr and two ints) without the GIL; settings changed meanwhile apply to the next call.
py::array_t<float> predict_lines(const PyEngine& self, const std::vector<std::string>& lines,
                                 std::vector<std::string>* errors) {
  const tclm::CostModelEngine engine = self.engine;
  std::vector<std::string_view> views(lines.begin(), lines.end());
  std::vector<float> scores;
  {
    py::gil_scoped_release release;
    scores = engine.predict_record_lines(views, errors);
  }
  return to_array(scores);
}

py::array_t<float> predict_features(const PyEngine& self, const FloatArray& x, const FloatArray& mask) {
  if (x.ndim() != 3 || x.shape(2) != tclm::kStepFeatureDim) {
    throw py::value_error("predict_features: x must have shape [n, L, " + std::to_string(tclm::kStepFeatureDim) +
                          "], got " + std::to_string(x.ndim()) + " dimensions");
  }
  const py::ssize_t n = x.shape(0), L = x.shape(1);
  if (mask.ndim() != 2 || mask.shape(0) != n || mask.shape(1) != L) {
    throw py::value_error("predict_features: mask must have shape [n, L] = [" + std::to_string(n) + ", " +
                          std::to_string(L) + "]");
  }
  if (L > std::numeric_limits<int>::max()) throw py::value_error("predict_features: L is too large");
  const tclm::CostModelEngine engine = self.engine;
  py::array_t<float> scores(n);
  const float* xp = x.data();
  const float* mp = mask.data();
  float* sp = scores.mutable_data();
  {
    py::gil_scoped_release release;
    engine.predict(xp, mp, n, static_cast<int>(L), sp);
  }
  return scores;
}

py::tuple featurize(const std::vector<std::string>& lines, int max_steps) {
  if (max_steps < 1) throw py::value_error("featurize: max_steps must be >= 1, got " + std::to_string(max_steps));
  const auto n = static_cast<py::ssize_t>(lines.size());
  const py::ssize_t L = max_steps, F = tclm::kStepFeatureDim;
  py::array_t<float> x(std::vector<py::ssize_t>{n, L, F});
  py::array_t<float> mask(std::vector<py::ssize_t>{n, L});
  float* xp = x.mutable_data();
  float* mp = mask.mutable_data();
  std::string bad;
  {
    py::gil_scoped_release release;
    std::fill(xp, xp + n * L * F, 0.0f);
    std::fill(mp, mp + n * L, 0.0f);
    tclm::RecordParser parser;
    tclm::MeasureRecord record;
    for (py::ssize_t i = 0; i < n; ++i) {
      const std::string why = tclm::parse_program_line(lines[i], parser, &record);
      if (!why.empty()) {
        bad = "featurize: line " + std::to_string(i) + ": " + why;
        break;
      }
      const int used = tclm::featurize_program(record.steps, max_steps, xp + i * L * F);
      std::fill(mp + i * L, mp + i * L + used, 1.0f);
    }
  }
  if (!bad.empty()) throw py::value_error(bad);
  return py::make_tuple(std::move(x), std::move(mask));
}

py::array_t<float> pool_features(const FloatArray& x, const FloatArray& mask) {
  if (x.ndim() != 3 || x.shape(2) != tclm::kStepFeatureDim) {
    throw py::value_error("pool_features: x must have shape [n, L, " + std::to_string(tclm::kStepFeatureDim) + "]");
  }
  const py::ssize_t n = x.shape(0), L = x.shape(1), F = tclm::kStepFeatureDim;
  if (mask.ndim() != 2 || mask.shape(0) != n || mask.shape(1) != L) {
    throw py::value_error("pool_features: mask must have shape [n, L] = [" + std::to_string(n) + ", " +
                          std::to_string(L) + "]");
  }
  py::array_t<float> out(std::vector<py::ssize_t>{n, static_cast<py::ssize_t>(tclm::kPooledFeatureDim)});
  const float* xp = x.data();
  const float* mp = mask.data();
  float* op = out.mutable_data();
  {
    py::gil_scoped_release release;
    std::vector<float> rows;
    for (py::ssize_t i = 0; i < n; ++i) {
      rows.clear();
      for (py::ssize_t t = 0; t < L; ++t) {
        if (mp[i * L + t] > 0) rows.insert(rows.end(), xp + (i * L + t) * F, xp + (i * L + t + 1) * F);
      }
      tclm::pool_step_features(rows.data(), static_cast<int>(rows.size() / F), op + i * tclm::kPooledFeatureDim);
    }
  }
  return out;
}

py::list parse_trace(const std::string& trace_json) {
  std::vector<tclm::TransformStep> steps;
  const std::string why = tclm::parse_trace_json(trace_json, &steps);
  if (!why.empty()) throw py::value_error("parse_trace: " + why);
  py::list out;
  for (const tclm::TransformStep& s : steps) {
    out.append(py::make_tuple(std::string(tclm::step_kind_name(s.kind)), s.ints, s.str));
  }
  return out;
}

/// An optional 1-d float array of length n (empty vector for None).
std::vector<float> optional_vector(const py::object& obj, py::ssize_t n, const char* name) {
  if (obj.is_none()) return {};
  FloatArray a = FloatArray::ensure(obj);
  if (!a) throw py::value_error(std::string("select_samples: ") + name + " must be a float array or None");
  if (a.ndim() != 1 || a.shape(0) != n) {
    throw py::value_error(std::string("select_samples: ") + name + " must have shape [n] = [" + std::to_string(n) + "]");
  }
  return std::vector<float>(a.data(), a.data() + n);
}

py::array_t<int64_t> select_samples(const FloatArray& points, int64_t budget, const std::string& method,
                                    uint64_t seed, const py::object& uncertainty, const py::object& scores,
                                    const py::object& selected, int threads, int n_clusters, double w_repr,
                                    double w_div, double w_unc, double w_fast, double prefilter_fraction,
                                    double balto_bias, double picks_per_cluster) {
  if (points.ndim() != 2) {
    throw py::value_error("select_samples: points must have shape [n, d], got " + std::to_string(points.ndim()) +
                          " dimensions");
  }
  const py::ssize_t n = points.shape(0), dim = points.shape(1);
  if (dim < 1) throw py::value_error("select_samples: points must have at least one column");
  if (budget < 0) throw py::value_error("select_samples: budget must be >= 0, got " + std::to_string(budget));
  const std::vector<float> unc = optional_vector(uncertainty, n, "uncertainty");
  const std::vector<float> sc = optional_vector(scores, n, "scores");
  std::vector<uint32_t> sel;
  if (!selected.is_none()) {
    auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(selected);
    if (!a || a.ndim() != 1) throw py::value_error("select_samples: selected must be a 1-d array of row indices");
    for (py::ssize_t i = 0; i < a.shape(0); ++i) {
      const int64_t v = a.data()[i];
      if (v < 0 || v >= n) {
        throw py::value_error("select_samples: selected[" + std::to_string(i) + "] = " + std::to_string(v) +
                              " is not a row index in [0, " + std::to_string(n) + ")");
      }
      sel.push_back(static_cast<uint32_t>(v));
    }
  }
  std::vector<uint32_t> picks;
  std::string bad;
  {
    py::gil_scoped_release release;
    try {
      tclm::SamplerOptions options;
      options.method = tclm::parse_sample_method(method);
      options.seed = seed;
      options.threads = threads;
      options.n_clusters = n_clusters;
      options.w_repr = w_repr;
      options.w_div = w_div;
      options.w_unc = w_unc;
      options.w_fast = w_fast;
      options.prefilter_fraction = prefilter_fraction;
      options.balto_bias = balto_bias;
      options.picks_per_cluster = picks_per_cluster;
      tclm::SamplePool pool;
      pool.points = std::span<const float>(points.data(), static_cast<size_t>(n * dim));
      pool.dim = static_cast<size_t>(dim);
      pool.uncertainty = unc;
      pool.scores = sc;
      pool.selected = sel;
      picks = tclm::select_samples(pool, static_cast<size_t>(budget), options);
    } catch (const tclm::Error& e) {  // every tclm::Error here is about the arguments
      bad = std::string("select_samples: ") + e.what();
    }
  }
  if (!bad.empty()) throw py::value_error(bad);
  py::array_t<int64_t> out(static_cast<py::ssize_t>(picks.size()));
  std::copy(picks.begin(), picks.end(), out.mutable_data());
  return out;
}

}  // namespace

PYBIND11_MODULE(_tclm, m) {
  m.doc() = "Native core of tclm (libtorch-free): inference engine, record/trace parsing, featurizer, sampler.";
  m.attr("__version__") = TCLM_VERSION_STRING;
  m.attr("FEATURE_VERSION") = tclm::kFeatureVersion;
  m.attr("TRACE_FEATURE_VERSION") = tclm::kTraceFeatureVersion;
  m.attr("STEP_FEATURE_DIM") = tclm::kStepFeatureDim;
  m.attr("POOLED_FEATURE_DIM") = tclm::kPooledFeatureDim;
  m.attr("DEFAULT_MAX_STEPS") = tclm::kDefaultMaxSteps;
  m.attr("SAMPLE_METHODS") = py::make_tuple("rdu", "random", "uncertainty", "kcenter", "balto");

  py::register_exception<tclm::Error>(m, "TclmError", PyExc_RuntimeError);

  py::class_<PyEngine>(m, "Engine", R"doc(
A trained Mamba cost model, scored by tclm's libtorch-free inference engine (include/tclm/infer.h).

Engine(path) loads a weights file (.tclm: `tclm train` writes best.tclm, `tclm export` a deployable
copy). Raises TclmError (a RuntimeError) naming the file when it is missing, unreadable, corrupt, of
another format version, not a Mamba model, or trained on a feature encoding this tclm does not know.

Scores are the model's ranking scores: higher = predicted faster; they are comparable within a task
(workload), not across tasks, and have no unit. Scoring is deterministic: a program's score does not
depend on the batch it is in, on the order or on the thread count.
)doc")
      .def(py::init(&load_engine), py::arg("path"))
      .def(
          "predict_lines",
          [](const PyEngine& self, const std::vector<std::string>& lines) { return predict_lines(self, lines, nullptr); },
          py::arg("lines"), R"doc(
Scores programs given as text lines; returns float32 ndarray [len(lines)].

A line is an Ansor measure record (one JSON object, TVM auto_scheduler's log format v0.2-v0.6; its
measured costs are ignored) or a MetaSchedule trace (a JSON array, Trace::AsJSON's
[[instructions], [decisions]]). A line that cannot be parsed, a blank line, or a program of the other
family than the model was trained on (see feature_encoding) scores NaN; predict_lines_with_errors
says why. Programs longer than max_steps keep their first max_steps steps. Runs on `threads` threads
without the GIL.
)doc")
      .def(
          "predict_lines_with_errors",
          [](const PyEngine& self, const std::vector<std::string>& lines) {
            std::vector<std::string> errors;
            py::array_t<float> scores = predict_lines(self, lines, &errors);
            return py::make_tuple(std::move(scores), std::move(errors));
          },
          py::arg("lines"), R"doc(
Like predict_lines, but returns (scores, errors): scores float32 ndarray [n] and errors a list of n
str, "" for a scored line, else the reason line i scored NaN (e.g. "a MetaSchedule trace program, but
the model was trained on Ansor step encoding v2").
)doc")
      .def("predict_features", &predict_features, py::arg("x"), py::arg("mask"), R"doc(
Scores featurized programs (tclm.featurize's output); returns float32 ndarray [n].

x: float32 [n, L, STEP_FEATURE_DIM]; mask: float32 [n, L], step t of program i is real if
mask[i, t] > 0. Other dtypes are converted. The features must be of the model's encoding
(feature_encoding): nothing checks it here. Raises ValueError on a shape mismatch.
)doc")
      .def_property(
          "threads", [](const PyEngine& self) { return self.engine.threads(); },
          [](PyEngine& self, int threads) {
            if (threads < 0) throw py::value_error("threads must be >= 0 (0 = all cores), got " + std::to_string(threads));
            self.engine.set_threads(threads);
          },
          "Worker threads per predict call; 0 (default) = all cores. A call uses at most one thread per 16 programs.")
      .def_property(
          "max_steps", [](const PyEngine& self) { return self.engine.max_steps(); },
          [](PyEngine& self, int max_steps) {
            if (max_steps < 1) throw py::value_error("max_steps must be >= 1, got " + std::to_string(max_steps));
            self.engine.set_max_steps(max_steps);
          },
          "Steps kept per program by predict_lines (the first ones); default DEFAULT_MAX_STEPS (72).")
      .def_property_readonly(
          "feature_version", [](const PyEngine& self) { return self.engine.feature_version(); },
          "Feature-encoding version the model was trained on: FEATURE_VERSION (Ansor) or TRACE_FEATURE_VERSION (MetaSchedule).")
      .def_property_readonly(
          "feature_encoding", [](const PyEngine& self) { return tclm::feature_version_name(self.engine.feature_version()); },
          "Human name of feature_version, e.g. 'Ansor step encoding v2' or 'MetaSchedule trace encoding v1'.")
      .def_property_readonly(
          "num_parameters", [](const PyEngine& self) { return self.num_parameters; }, "Number of float parameters of the model.")
      .def_property_readonly("model_kind", [](const PyEngine& self) { return self.model_kind; }, "Model kind ('mamba').")
      .def_property_readonly(
          "config", [](const PyEngine& self) { return self.config_json; }, "The Mamba hyper-parameters, a JSON object (str).")
      .def_property_readonly(
          "metadata", [](const PyEngine& self) { return self.metadata_json; },
          "The training metadata stored in the weights file, JSON (str; informational).")
      .def_property_readonly("path", [](const PyEngine& self) { return self.path; }, "The weights file it was loaded from.")
      .def("__repr__", [](const PyEngine& self) {
        return "<tclm.Engine '" + self.path + "': " + self.model_kind + ", " +
               tclm::feature_version_name(self.engine.feature_version()) + ", " + std::to_string(self.num_parameters) +
               " parameters>";
      });

  m.def("parse_trace", &parse_trace, py::arg("trace_json"), R"doc(
Parses a MetaSchedule trace (Trace::AsJSON's [[instructions], [decisions]], as JSON text) into its
steps: a list of (kind, ints, str) tuples, one per instruction.

kind: the canonical instruction name ('GetBlock', 'Split', ...): renames share one kind ('GetSBlock'
is reported as 'GetBlock', 'GetConsumers' as 'GetProducers'); an instruction tclm does not know has
kind 'Other' and its name in str.
ints: [n_inputs, n_outputs, value, value_known, in_postproc, list...] (include/tclm/record.h,
trace_slot), e.g. a Split's list holds its factors (0 = unknown), a SamplePerfectTile's list the
sampled tile sizes. str: annotation key, thread axis or storage scope (or '').
Raises ValueError with the reason when the text is not a well-formed trace.
)doc");

  m.def("featurize", &featurize, py::arg("lines"), py::arg("max_steps") = tclm::kDefaultMaxSteps, R"doc(
Featurizes programs given as lines (Ansor record JSON objects or MetaSchedule trace JSON arrays, as
Engine.predict_lines reads them). Returns (x, mask):
  x    float32 [n, max_steps, STEP_FEATURE_DIM]: one row per step (docs/feature-encoding.md; a line's
       family decides its encoding), zero rows after the program's last kept step;
  mask float32 [n, max_steps]: 1 for a real step, 0 for padding (row sums = steps kept).
Programs longer than max_steps keep their first max_steps steps. Raises ValueError naming the index
of the first line that cannot be parsed, or when max_steps < 1.
)doc");

  m.def("pool_features", &pool_features, py::arg("x"), py::arg("mask"), R"doc(
Pools featurized programs into one vector each (the points tclm's sampler uses): returns float32
[n, POOLED_FEATURE_DIM] = per-slot mean over the real steps, per-slot max, log2(1 + steps).
x: [n, L, STEP_FEATURE_DIM], mask: [n, L] (featurize's output). Raises ValueError on a shape mismatch.
)doc");

  m.def("feature_version_name", [](uint32_t v) { return tclm::feature_version_name(v); }, py::arg("version"),
        "Human name of a feature-encoding version ('Ansor step encoding v2', ...).");

  m.def("select_samples", &select_samples, py::arg("points"), py::arg("budget"), py::arg("method") = "rdu",
        py::arg("seed") = 0, py::arg("uncertainty") = py::none(), py::arg("scores") = py::none(), py::kw_only(),
        py::arg("selected") = py::none(), py::arg("threads") = 0, py::arg("n_clusters") = 0,
        py::arg("w_repr") = 1.0, py::arg("w_div") = 1.0, py::arg("w_unc") = 1.0,
        py::arg("w_fast") = tclm::SamplerOptions{}.w_fast,
        py::arg("prefilter_fraction") = 0.3, py::arg("balto_bias") = 1.0,
        py::arg("picks_per_cluster") = tclm::SamplerOptions{}.picks_per_cluster, R"doc(
Chooses which programs to measure next (active sampling, include/tclm/sample.h); returns int64
ndarray of min(budget, n - len(selected)) distinct row indices of points, none in selected.

points: float [n, d] (converted to float32), e.g. pool_features(...) or model embeddings; finite.
method: 'rdu' (TCL's sampler: k-means, representativeness + diversity + uncertainty), 'random',
  'uncertainty' (needs uncertainty), 'kcenter', 'balto' (needs scores).
seed: the same input, options and seed give the same indices (whatever the thread count).
uncertainty: float [n] or None, larger = model less sure (rdu uses it when given).
scores: float [n] or None, predicted scores, higher = faster (balto; rdu with w_fast > 0).
Keyword-only: selected (indices measured earlier), threads (0 = OpenMP default), n_clusters (rdu,
0 = auto = ceil(budget / picks_per_cluster), at most 1024), picks_per_cluster (rdu, >= 1, default 1),
w_repr / w_div / w_unc / w_fast (rdu weights; w_fast weighs the percentile of the predicted score),
prefilter_fraction (rdu), balto_bias (balto).
Order: rdu round-robin over clusters, random in draw order, uncertainty by decreasing uncertainty,
kcenter / balto in greedy order. Raises ValueError on a bad shape, a non-finite value, an unknown
method or an option out of range.
)doc");
}
