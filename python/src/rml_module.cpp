// rml._rml: the pybind11 bindings behind the `rml` Python package. Every call forwards to rml's headers;
// the only logic here is conversion (NumPy <-> Tensor, Status -> exception, Python callbacks).
//
// Conventions:
// - A failed Status or Result raises the rml.Error subclass of its code (rml.InvalidArgumentError, ...),
//   carrying the C++ message unchanged; `code_name` is a class attribute of each subclass.
// - Tensors and NumPy arrays share memory both ways: np.asarray(tensor) is a view (buffer protocol), and a
//   C-contiguous, aligned float32/float16/int32/int64/bool array becomes a Tensor whose storage holds the
//   array. NumPy has no bfloat16: a bf16 tensor's buffer is its uint16 bit patterns (Tensor.float32()
//   widens it), and a bf16 tensor is made from float data (rounded) or from uint16 bits.
// - A Python callback's own exception (a trace function, a partition function) stops the C++ call and is
//   re-raised unchanged once it returns.
// - Graph.run and Executor.run release the GIL while the kernels run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rml/core/equal.hpp"
#include "rml/core/status.hpp"
#include "rml/core/tensor.hpp"
#include "rml/edit/edit.hpp"
#include "rml/exec/edit_hooks.hpp"
#include "rml/exec/executor.hpp"
#include "rml/exec/session.hpp"
#include "rml/io/graph_io.hpp"
#include "rml/ir/graph.hpp"
#include "rml/serial/serialize.hpp"
#include "rml/version.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace rml::python {
namespace {

// ---------------------------------------------------------------------------------------------
// Errors

constexpr std::size_t kCodeCount = static_cast<std::size_t>(Code::internal) + 1;

/// The exception class of each code (index 0, Code::ok, holds the base class rml.Error). Created once
/// at import; module objects live as long as the interpreter, so the references are never dropped.
std::array<PyObject*, kCodeCount> error_classes{};

[[noreturn]] void throw_status(const Status& status) { throw Error(status); }

void check(const Status& status) {
  if (!status.ok()) throw_status(status);
}

template <typename T>
T unwrap(Result<T>&& result) {
  if (!result.ok()) throw_status(result.error());
  return std::move(*result);
}

/// Creates rml.Error and one subclass per code; each class says its code in `code_name`.
void define_errors(py::module_& m) {
  struct Row {
    Code code;
    const char* name;
    Code parent;        // the rml class it derives from (Code::ok: rml.Error itself)
    PyObject* builtin;  // a standard exception the class also derives from, so generic handlers work
    const char* doc;
  };
  // FailedPreconditionError is an InvalidArgumentError: a graph the call cannot take in its present
  // state (finalized, consumed) is an argument it cannot take now, so `except InvalidArgumentError`
  // around a merge catches both, and `except FailedPreconditionError` tells them apart. Rows come
  // parents first.
  const Row rows[] = {
      {Code::invalid_argument, "InvalidArgumentError", Code::ok, PyExc_ValueError,
       "An argument the call cannot take (INVALID_ARGUMENT); also a ValueError."},
      {Code::failed_precondition, "FailedPreconditionError", Code::invalid_argument, nullptr,
       "A graph the call cannot take in its present state, e.g. a finalized one (FAILED_PRECONDITION); also an "
       "InvalidArgumentError and a ValueError."},
      {Code::not_found, "NotFoundError", Code::ok, PyExc_LookupError,
       "A missing file, node or value (NOT_FOUND); also a LookupError."},
      {Code::out_of_range, "OutOfRangeError", Code::ok, PyExc_IndexError,
       "An index outside its range, e.g. a gather index at run time (OUT_OF_RANGE); also an IndexError."},
      {Code::unsupported, "UnsupportedError", Code::ok, PyExc_NotImplementedError,
       "Something this build or format version does not support (UNSUPPORTED); also a NotImplementedError."},
      {Code::data_loss, "DataLossError", Code::ok, nullptr,
       "Truncated or corrupt data, or a model's two files from different saves (DATA_LOSS)."},
      {Code::internal, "InternalError", Code::ok, nullptr,
       "A bug, or a foreign exception inside a C++ call (INTERNAL)."},
  };
  py::dict base_attrs("code_name"_a = "UNKNOWN", "code"_a = py::none());
  PyObject* base = PyErr_NewExceptionWithDoc("rml.Error", "The base class of every error rml raises.", PyExc_Exception,
                                             base_attrs.ptr());
  if (base == nullptr) throw py::error_already_set();
  error_classes[0] = base;
  m.add_object("Error", py::handle(base));
  for (const Row& row : rows) {
    py::dict attrs("code_name"_a = std::string(code_name(row.code)), "code"_a = py::cast(row.code));
    const py::handle parent(error_classes[static_cast<std::size_t>(row.parent)]);
    py::tuple bases = row.builtin ? py::make_tuple(parent, py::handle(row.builtin)) : py::make_tuple(parent);
    const std::string qualified = std::string("rml.") + row.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), row.doc, bases.ptr(), attrs.ptr());
    if (cls == nullptr) throw py::error_already_set();
    error_classes[static_cast<std::size_t>(row.code)] = cls;
    m.add_object(row.name, py::handle(cls));
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const auto index = static_cast<std::size_t>(e.code());
      PyObject* cls = index < kCodeCount && error_classes[index] ? error_classes[index] : error_classes[0];
      PyErr_SetString(cls, e.what());
    }
  });
}

/// Runs Python callbacks from inside a C++ call. A Python exception is kept and the C++ call is
/// stopped with an rml::Error; rethrow_pending() then raises the Python exception unchanged.
class PythonCallbacks {
 public:
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (py::error_already_set& e) {
      if (!pending_) pending_.emplace(std::move(e));
      throw Error(Code::internal, "a Python callback raised an exception");
    }
  }
  void rethrow_pending() {
    if (!pending_) return;
    py::error_already_set e = std::move(*pending_);
    pending_.reset();
    throw e;
  }

 private:
  std::optional<py::error_already_set> pending_;
};

// ---------------------------------------------------------------------------------------------
// Tensors and NumPy

/// Storage over a NumPy array's memory; holds a reference to the array so the bytes outlive it.
class NumpyStorage final : public Storage {
 public:
  explicit NumpyStorage(py::array array)
      : Storage(static_cast<std::byte*>(const_cast<void*>(array.data())), static_cast<std::size_t>(array.nbytes()),
                array.writeable()),
        array_(std::move(array)) {}
  NumpyStorage(const NumpyStorage&) = delete;
  NumpyStorage& operator=(const NumpyStorage&) = delete;
  // The last tensor may die on a thread that does not hold the GIL (a run with the GIL released).
  ~NumpyStorage() override {
    if (!Py_IsInitialized()) {
      array_.release();  // the interpreter is gone; so is the array
      return;
    }
    py::gil_scoped_acquire gil;
    array_ = py::array();
  }

 private:
  py::array array_;
};

py::module_ numpy() { return py::module_::import("numpy"); }

/// The rml dtype of a NumPy dtype: float32, float16, int32, int64 and bool map, anything else is
/// INVALID_ARGUMENT (NumPy has no bfloat16: ask for rml.bfloat16 or "bf16" by name).
DType dtype_of_numpy(const py::dtype& dt, const char* what) {
  if (dt.kind() == 'f' && dt.itemsize() == 4) return DType::f32;
  if (dt.kind() == 'f' && dt.itemsize() == 2) return DType::f16;
  if (dt.kind() == 'i' && dt.itemsize() == 4) return DType::i32;
  if (dt.kind() == 'i' && dt.itemsize() == 8) return DType::i64;
  if (dt.kind() == 'b') return DType::boolean;
  throw Error(Code::invalid_argument,
              std::string(what) +
                  ": rml has the dtypes f32, f16, bf16, i32, i64 and bool (float32, float16, rml.bfloat16, int32, "
                  "int64, bool); got " +
                  py::str(static_cast<const py::handle&>(dt)).cast<std::string>());
}

/// The NumPy dtype of a tensor's elements; bf16, which NumPy lacks, as uint16 (its bit patterns).
py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return py::dtype("float16");
    case DType::bf16:
      return py::dtype("uint16");
    case DType::i32:
      return py::dtype("int32");
    case DType::i64:
      return py::dtype("int64");
    case DType::boolean:
      return py::dtype("bool");
    default:
      return py::dtype("float32");
  }
}

std::string dtype_text(const py::handle& data) {
  const py::object dt = py::getattr(data, "dtype", py::none());
  return dt.is_none() ? std::string(py::str(py::type::of(data).attr("__name__"))) : std::string(py::str(dt));
}

/// TypeError for arrays whose elements are not numbers (object, str, bytes, datetime, structured):
/// NumPy would try to parse or cast them element by element, and its failure would be lost.
void check_numeric(const py::array& array, const char* what) {
  const char kind = array.dtype().kind();
  if (kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b' || kind == 'c') return;  // complex: a dtype error later
  throw py::type_error(std::string(what) + ": an array of dtype " + std::string(py::str(array.dtype())) +
                       " holds no numbers; rml takes arrays of numbers or booleans");
}

/// A dtype argument: rml.DType, a name ("f32", "f16", "bf16", "i32", "i64", "bool", "bfloat16"), or
/// anything numpy.dtype() takes.
DType dtype_arg(const py::handle& h, const char* what = "dtype") {
  if (py::isinstance<DType>(h)) return h.cast<DType>();
  if (py::isinstance<py::str>(h)) {
    const auto s = h.cast<std::string>();
    if (auto d = parse_dtype(s)) return *d;
    if (s == "bfloat16") return DType::bf16;
  }
  return dtype_of_numpy(py::dtype::from_args(py::reinterpret_borrow<py::object>(h)), what);
}

/// The dtype rml gives data of this NumPy dtype when none is asked for: float16 f16 and bool bool (an
/// array of those was made so on purpose); other floats f32 and other integers i32, int64 included —
/// NumPy's default for Python floats and ints is float64 and int64, and rml keeps the f32/i32 it gave
/// them before it had i64 (ask for rml.int64 to keep int64).
DType default_dtype(const py::dtype& dt, const char* what) {
  switch (dt.kind()) {
    case 'f':
      return dt.itemsize() == 2 ? DType::f16 : DType::f32;
    case 'b':
      return DType::boolean;
    case 'i':
    case 'u':
      return DType::i32;
    default:
      return dtype_of_numpy(dt, what);
  }
}

/// `data` (a Tensor, a NumPy array, or anything numpy.asarray takes) as a Tensor of `dtype` (default: from
/// the data). A C-contiguous, aligned array of that dtype is shared, not copied.
Tensor to_tensor(const py::handle& data, std::optional<DType> dtype, const char* what = "rml.tensor") {
  if (py::isinstance<Tensor>(data)) {
    const Tensor& t = data.cast<const Tensor&>();
    if (dtype && *dtype != t.dtype())
      throw Error(Code::invalid_argument, std::string(what) + ": the tensor is " + t.type().to_string() + ", not " +
                                              std::string(dtype_name(*dtype)) + "; convert it with rml.cast");
    return t;
  }
  py::array array = numpy().attr("asarray")(data);
  check_numeric(array, what);
  const DType target = dtype ? *dtype : default_dtype(array.dtype(), what);
  const char kind = array.dtype().kind();
  // An integer array wider than int32 must fit: rml stores int64 indices as int32 unless asked for i64.
  if (target == DType::i32 && kind != 'f' && array.dtype().itemsize() > 4 && array.size() > 0) {
    const auto lo = array.attr("min")().cast<long double>();
    const auto hi = array.attr("max")().cast<long double>();
    if (lo < INT32_MIN || hi > INT32_MAX)
      throw Error(Code::invalid_argument, std::string(what) +
                                              ": integers outside int32's range cannot become i32 (ask for "
                                              "dtype=rml.int64 to keep them)");
  }
  // Numbers become bools only when each is 0 or 1.
  if (target == DType::boolean && kind != 'b' && array.size() > 0 &&
      !numpy().attr("isin")(array, py::make_tuple(0, 1)).attr("all")().cast<bool>())
    throw Error(Code::invalid_argument, std::string(what) + ": only 0 and 1 become bool");
  if (target == DType::bf16) {
    // NumPy has no bfloat16: uint16 arrays are bit patterns (what np.asarray gives back for a bf16
    // tensor); anything else is converted to float32 and rounded to nearest even.
    Tensor out;
    if (kind == 'u' && array.dtype().itemsize() == 2) {
      array = py::array_t<std::uint16_t, py::array::c_style | py::array::forcecast>::ensure(array);
      std::vector<std::int64_t> dims(array.shape(), array.shape() + array.ndim());
      out = Tensor::zeros(DType::bf16, Shape(std::move(dims)));
      if (out.nbytes()) std::memcpy(out.mutable_raw_data(), array.data(), out.nbytes());
      return out;
    }
    py::array_t<float, py::array::c_style | py::array::forcecast> f =
        py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
    if (!f)
      throw Error(Code::invalid_argument,
                  std::string(what) + ": cannot convert an array of " + dtype_text(data) + " to bf16");
    std::vector<std::int64_t> dims(f.shape(), f.shape() + f.ndim());
    out = Tensor::zeros(DType::bf16, Shape(std::move(dims)));
    const float* in = f.data();
    bf16* o = out.mutable_data<bf16>();
    for (py::ssize_t i = 0; i < f.size(); ++i) o[i] = bf16(in[i]);
    return out;
  }
  // Converts only when the dtype, byte order or layout differs; a matching array comes back as is.
  {
    py::object converted = numpy().attr("require")(array, "dtype"_a = numpy_dtype(target), "requirements"_a = "C");
    array = py::reinterpret_borrow<py::array>(converted);
  }
  if (!array) {
    throw Error(Code::invalid_argument, std::string(what) + ": cannot convert an array of " + dtype_text(data) +
                                            " to " + std::string(dtype_name(target)));
  }
  if (reinterpret_cast<std::uintptr_t>(array.data()) % element_size(target) != 0) array = array.attr("copy")();
  std::vector<std::int64_t> dims(array.shape(), array.shape() + array.ndim());
  TensorType type{target, Shape(std::move(dims))};
  return Tensor::view(std::move(type), std::make_shared<NumpyStorage>(std::move(array)), 0);
}

std::optional<DType> optional_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return dtype_arg(dtype);
}

/// Two operands of a binary op: a Python scalar or array next to a Tensor takes the Tensor's dtype.
std::pair<Tensor, Tensor> operands(const py::handle& a, const py::handle& b) {
  const bool ta = py::isinstance<Tensor>(a), tb = py::isinstance<Tensor>(b);
  if (ta && !tb) {
    Tensor x = a.cast<Tensor>();
    return {x, to_tensor(b, x.dtype(), "operand")};
  }
  if (tb && !ta) {
    Tensor y = b.cast<Tensor>();
    return {to_tensor(a, y.dtype(), "operand"), y};
  }
  return {to_tensor(a, std::nullopt, "operand"), to_tensor(b, std::nullopt, "operand")};
}

const char* no_data_message(const Tensor& t) {
  return t.is_symbolic() ? "Tensor: a symbolic tensor (inside rml.trace) holds no data"
                         : "Tensor: the tensor holds no data";
}

const Tensor& tensor_with_data(const py::handle& self) {
  const Tensor& t = self.cast<const Tensor&>();
  if (!t.defined()) throw Error(Code::failed_precondition, no_data_message(t));
  return t;
}

/// The buffer of a tensor that holds data.
py::buffer_info tensor_buffer(const Tensor& t) {
  const auto itemsize = static_cast<py::ssize_t>(element_size(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = itemsize;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  // PEP 3118 codes: 'f' float32, 'e' float16, 'i' int32, 'q' int64, '?' bool; bf16 as 'H' (uint16 bits).
  const std::string format = [&]() -> std::string {
    switch (t.dtype()) {
      case DType::f16:
        return "e";
      case DType::bf16:
        return "H";
      case DType::i32:
        return py::format_descriptor<std::int32_t>::format();
      case DType::i64:
        return py::format_descriptor<std::int64_t>::format();
      case DType::boolean:
        return "?";
      default:
        return py::format_descriptor<float>::format();
    }
  }();
  return {const_cast<std::byte*>(t.raw_data()),
          itemsize,
          format,
          static_cast<py::ssize_t>(shape.size()),
          std::move(shape),
          std::move(strides),
          !t.storage()->writable()};
}

/// The buffer protocol's getbuffer for Tensor. pybind11's own (def_buffer) cannot refuse a request without
/// terminating the process, and a symbolic tensor has no bytes to give: this one refuses with BufferError.
/// The buffer_info it stores in `view->internal` is freed by pybind11's releasebuffer, as for def_buffer.
extern "C" int tensor_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  if (view == nullptr) {
    PyErr_SetString(PyExc_BufferError, "rml.Tensor: no buffer view to fill");
    return -1;
  }
  std::memset(view, 0, sizeof(Py_buffer));
  try {
    const Tensor& t = py::handle(obj).cast<const Tensor&>();
    if (!t.defined()) {
      PyErr_SetString(PyExc_BufferError, no_data_message(t));
      return -1;
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && !t.storage()->writable()) {
      PyErr_SetString(PyExc_BufferError,
                      "rml.Tensor: a writable buffer was asked of read-only memory (a mapped weight)");
      return -1;
    }
    auto* info = new py::buffer_info(tensor_buffer(t));
    view->obj = obj;
    view->internal = info;
    view->buf = info->ptr;
    view->itemsize = info->itemsize;
    view->len = static_cast<Py_ssize_t>(t.nbytes());
    view->readonly = info->readonly ? 1 : 0;
    view->ndim = 1;  // a consumer that asks for no shape sees the bytes as one flat run
    if ((flags & PyBUF_FORMAT) == PyBUF_FORMAT) view->format = const_cast<char*>(info->format.c_str());
    if ((flags & PyBUF_ND) == PyBUF_ND) {
      view->ndim = static_cast<int>(info->ndim);
      view->shape = info->shape.data();
    }
    if ((flags & PyBUF_STRIDES) == PyBUF_STRIDES) view->strides = info->strides.data();
    Py_INCREF(obj);
    return 0;
  } catch (...) {
    PyErr_SetString(PyExc_BufferError, "rml.Tensor: cannot export a buffer");
    return -1;
  }
}

py::object tensor_as_numpy(const py::object& self) {
  tensor_with_data(self);  // a proper rml error rather than NumPy's fallback for objects without a buffer
  return numpy().attr("asarray")(self);
}

/// The elements as NumPy numbers: the shared array, except for bf16, widened (exactly) to a new float32 array.
py::object tensor_values(const py::object& self) {
  const Tensor& t = tensor_with_data(self);
  if (t.dtype() != DType::bf16) return tensor_as_numpy(self);
  py::array_t<float> out(std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()));
  float* o = out.mutable_data();
  const bf16* in = t.data<bf16>();
  for (std::int64_t i = 0; i < t.numel(); ++i) o[i] = static_cast<float>(in[i]);
  return out;
}

/// A shape given as reshape(2, 3), reshape((2, 3)) or reshape([2, 3]).
/// A shape as the Python tuple NumPy uses.
py::tuple shape_tuple(const Shape& shape) {
  py::tuple out(shape.rank());
  for (std::size_t i = 0; i < shape.rank(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

std::vector<std::int64_t> dims_arg(const py::args& args) {
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return args[0].cast<std::vector<std::int64_t>>();
  return args.cast<std::vector<std::int64_t>>();
}

std::string tensor_repr(const py::object& self) {
  const Tensor& t = self.cast<const Tensor&>();
  const std::string head = "rml.Tensor(" + t.type().to_string() + ", ";
  if (!t.defined()) return head + (t.is_symbolic() ? "symbolic)" : "no data)");
  // Rows after the first line up under the first, as NumPy's own repr does.
  return head +
         py::str(numpy().attr("array2string")(tensor_values(self), "separator"_a = ", ", "prefix"_a = head))
             .cast<std::string>() +
         ")";
}

// ---------------------------------------------------------------------------------------------
// Devices

Device device_arg(const py::handle& h) {
  if (py::isinstance<Device>(h)) return h.cast<Device>();
  const auto text = h.cast<std::string>();
  if (auto d = Device::parse(text)) return *d;
  throw Error(Code::invalid_argument, "device: '" + text + "' is not a device; write cpu, cpu:N, gpu or gpu:N");
}

/// rml.to(tensor, device): rml's tensors live in host memory, so any CPU device holds them as they are.
Tensor tensor_to(const Tensor& t, const py::handle& device) {
  const Device d = device_arg(device);
  if (!d.is_cpu() && !Device::has_accelerator())
    throw Error(Code::unsupported, "to: this build has no accelerator; " + d.to_string() + " is not available");
  return t;
}

// ---------------------------------------------------------------------------------------------
// Graphs

/// The inputs of a run: tensors as they are (the run checks them), anything else converted to the dtype
/// `expected(i)` says input i has (nothing when there is no input i).
template <typename Expected>
std::vector<Tensor> run_inputs(const py::iterable& inputs, Expected&& expected) {
  std::vector<Tensor> out;
  for (const py::handle& h : inputs) {
    const std::optional<DType> dtype = py::isinstance<Tensor>(h) ? std::nullopt : expected(out.size());
    out.push_back(to_tensor(h, dtype, "run"));
  }
  return out;
}

std::vector<Tensor> run_graph(const Graph& graph, const py::iterable& inputs) {
  const GraphDef& def = graph.def();
  std::vector<Tensor> in = run_inputs(inputs, [&](std::size_t i) -> std::optional<DType> {
    if (i >= def.inputs.size() || def.inputs[i] >= def.values.size()) return std::nullopt;
    return def.values[def.inputs[i]].type.dtype;
  });
  Result<std::vector<Tensor>> out = [&] {
    py::gil_scoped_release nogil;
    return graph.run(in);
  }();
  return unwrap(std::move(out));
}

std::string graph_repr(const Graph& g) {
  if (g.consumed()) return "<rml.Graph '" + g.name() + "' (consumed)>";
  const auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  return "<rml.Graph '" + g.name() + "': " + std::to_string(g.def().nodes.size()) + " operators, inputs (" +
         join(g.input_names()) + "), outputs (" + join(g.output_names()) + ")" + (g.finalized() ? ", finalized>" : ">");
}

/// `encoder.h` for one end of a connection.
std::string endpoint_text(const Endpoint& e) { return e.part + "." + e.name; }

/// Python graphs lent to a C++ merge: moved into GraphParts, and moved back (consumed or untouched)
/// however the call ends, so each Python Graph object keeps the body its views point into.
class LentParts {
 public:
  explicit LentParts(const std::vector<std::pair<std::string, Graph*>>& parts) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      Graph* g = parts[i].second;
      if (g == nullptr)
        throw Error(Code::invalid_argument, "merge: part '" + parts[i].first + "' is None, not a Graph");
      for (std::size_t j = 0; j < i; ++j)
        if (owners_[j] == g)
          throw Error(Code::invalid_argument, "merge: parts '" + parts[j].first + "' and '" + parts[i].first +
                                                  "' are the same Graph object; pass a copy() for the second");
      owners_.push_back(g);
    }
    parts_.reserve(parts.size());  // so that no push_back below can throw with a graph half lent
    for (std::size_t i = 0; i < parts.size(); ++i) parts_.push_back({parts[i].first, std::move(*owners_[i])});
  }
  LentParts(const LentParts&) = delete;
  LentParts& operator=(const LentParts&) = delete;
  ~LentParts() {
    for (std::size_t i = 0; i < parts_.size(); ++i) *owners_[i] = std::move(parts_[i].graph);
  }
  std::vector<GraphPart>& parts() { return parts_; }

 private:
  std::vector<Graph*> owners_;
  std::vector<GraphPart> parts_;
};

using EndpointPair = std::pair<std::string, std::string>;

py::tuple merge_parts(const std::vector<std::pair<std::string, Graph*>>& parts,
                      const std::vector<std::pair<EndpointPair, EndpointPair>>& connections, IoNames io_names,
                      CrossDevice cross_device) {
  std::vector<Connection> links;
  for (const auto& [from, to] : connections) links.push_back({{from.first, from.second}, {to.first, to.second}});
  MergeOptions options;
  options.io_names = io_names;
  options.cross_device = cross_device;
  Result<MergedGraph> merged = [&] {
    LentParts lent(parts);
    return merge(lent.parts(), links, options);
  }();
  MergedGraph m = unwrap(std::move(merged));
  return py::make_tuple(std::move(m.graph), std::move(m.renames));
}

/// (parts as a dict in order, connections as ("part.output", "part.input") pairs).
py::tuple split_result(SplitGraph&& split) {
  py::dict parts;
  for (GraphPart& p : split.parts) parts[py::str(p.name)] = py::cast(std::move(p.graph));
  py::list connections;
  for (const Connection& c : split.connections)
    connections.append(py::make_tuple(endpoint_text(c.from), endpoint_text(c.to)));
  return py::make_tuple(std::move(parts), std::move(connections));
}

py::tuple split_graph(Graph& graph, const py::object& cut_or_function) {
  if (py::isinstance<ValueCut>(cut_or_function))
    return split_result(unwrap(split(graph, cut_or_function.cast<const ValueCut&>())));
  if (!PyCallable_Check(cut_or_function.ptr()))
    throw Error(Code::invalid_argument,
                "split: pass a ValueCut (graph.min_value_cut()) or a function from Node to str");
  PythonCallbacks callbacks;
  Result<SplitGraph> parts = split(graph, [&](const Node& node) -> std::string {
    return callbacks.call([&] {
      py::object part = cut_or_function(node);
      if (!py::isinstance<py::str>(part))
        throw Error(
            Code::invalid_argument,
            "it returned " + py::str(py::type::handle_of(part).attr("__name__")).cast<std::string>() + ", not a str");
      return part.cast<std::string>();
    });
  });
  callbacks.rethrow_pending();
  return split_result(unwrap(std::move(parts)));
}

/// The outputs a trace function returned: one Tensor, or a list or tuple of them.
std::vector<Tensor> trace_outputs(const py::object& out) {
  if (py::isinstance<Tensor>(out)) return {out.cast<Tensor>()};
  if (!py::isinstance<py::list>(out) && !py::isinstance<py::tuple>(out))
    throw Error(Code::invalid_argument, "the function must return a Tensor or a list of Tensors, not " +
                                            py::str(py::type::handle_of(out).attr("__name__")).cast<std::string>());
  std::vector<Tensor> outputs;
  for (const py::handle& h : out) {
    if (!py::isinstance<Tensor>(h))
      throw Error(Code::invalid_argument, "the function returned a list holding a " +
                                              py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>() +
                                              "; return the Tensors the rml ops computed");
    outputs.push_back(h.cast<Tensor>());
  }
  return outputs;
}

Graph trace_graph(const py::function& fn, const std::vector<TensorSpec>& signature, std::string name,
                  const std::vector<std::string>& output_names) {
  PythonCallbacks callbacks;
  Result<Graph> graph = trace(
      [&](const std::vector<Tensor>& inputs) {
        return callbacks.call([&] {
          py::list args;
          for (const Tensor& t : inputs) args.append(py::cast(t));
          return trace_outputs(fn(args));
        });
      },
      signature, std::move(name), output_names);
  callbacks.rethrow_pending();
  return unwrap(std::move(graph));
}

// ---------------------------------------------------------------------------------------------
// Serialization

/// What rml.serialize writes and rml.deserialize reads: each Python class backed by a reflected C++
/// type (a Graph is written as its GraphDef, weights included).
constexpr const char* serializable_types = "Graph, Tensor, TensorType, Device, NodeDef, ValueDef and Origin";

template <typename T>
py::bytes serialize_as(const T& value) {
  if constexpr (std::is_same_v<T, Graph>) check(detail::verify_weights(value));  // weights cut short: DATA_LOSS
  const std::vector<std::uint8_t> bytes = serialize(value);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// Calls f(value) with the C++ object behind `obj`, one of serializable_types.
template <typename F>
decltype(auto) visit_serializable(const py::handle& obj, const char* what, F&& f) {
  if (py::isinstance<Graph>(obj)) return f(obj.cast<const Graph&>());
  if (py::isinstance<Tensor>(obj)) return f(obj.cast<const Tensor&>());
  if (py::isinstance<TensorType>(obj)) return f(obj.cast<const TensorType&>());
  if (py::isinstance<Device>(obj)) return f(obj.cast<const Device&>());
  if (py::isinstance<NodeDef>(obj)) return f(obj.cast<const NodeDef&>());
  if (py::isinstance<ValueDef>(obj)) return f(obj.cast<const ValueDef&>());
  if (py::isinstance<Origin>(obj)) return f(obj.cast<const Origin&>());
  throw Error(Code::invalid_argument, std::string(what) + ": rml serializes " + serializable_types + ", not " +
                                          std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

py::bytes serialize_object(const py::object& obj) {
  return visit_serializable(obj, "serialize", [](const auto& value) { return serialize_as(value); });
}

template <typename T>
py::object read_as(std::span<const std::uint8_t> bytes) {
  return py::cast(unwrap(deserialize<T>(bytes)));
}

/// The `type` object (rml.Graph, the default, rml.Tensor, ...) that a document holds.
py::object deserialize_bytes(std::span<const std::uint8_t> bytes, const py::handle& type) {
  if (type.is(py::type::of<Graph>())) return read_as<Graph>(bytes);
  if (type.is(py::type::of<Tensor>())) return read_as<Tensor>(bytes);
  if (type.is(py::type::of<TensorType>())) return read_as<TensorType>(bytes);
  if (type.is(py::type::of<Device>())) return read_as<Device>(bytes);
  if (type.is(py::type::of<NodeDef>())) return read_as<NodeDef>(bytes);
  if (type.is(py::type::of<ValueDef>())) return read_as<ValueDef>(bytes);
  if (type.is(py::type::of<Origin>())) return read_as<Origin>(bytes);
  throw Error(Code::invalid_argument, std::string("deserialize: type must be one of ") + serializable_types + ", not " +
                                          std::string(py::repr(type)));
}

std::span<const std::uint8_t> buffer_bytes(const py::buffer_info& info) {
  if (info.ndim != 1 || info.strides[0] != info.itemsize)
    throw Error(Code::invalid_argument, "deserialize: pass bytes, a bytearray or a contiguous one-dimensional buffer");
  return {static_cast<const std::uint8_t*>(info.ptr), static_cast<std::size_t>(info.size * info.itemsize)};
}

py::bytes graph_bytes(const Graph& g) { return serialize_as(g); }

Graph graph_from_buffer(const py::buffer& data) {
  const py::buffer_info info = data.request();
  return unwrap(deserialize<Graph>(buffer_bytes(info)));
}

// ---------------------------------------------------------------------------------------------
// The module

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);

template <BinaryOp Op>
Tensor apply_binary(const py::object& a, const py::object& b) {
  auto [x, y] = operands(a, b);
  return Op(x, y);
}

/// `other <op> self`, for Tensor's reflected operators (`2 * x`).
template <BinaryOp Op>
Tensor apply_reflected(const py::object& self, const py::object& other) {
  return apply_binary<Op>(other, self);
}

template <BinaryOp Op>
void def_binary(py::module_& m, const char* name, const char* doc) {
  m.def(name, &apply_binary<Op>, "a"_a, "b"_a, doc);
}

void define_core(py::module_& m) {
  py::enum_<Code>(m, "Code", "rml's error codes; every rml.Error subclass names one in `code`.")
      .value("ok", Code::ok)
      .value("invalid_argument", Code::invalid_argument)
      .value("failed_precondition", Code::failed_precondition)
      .value("not_found", Code::not_found)
      .value("out_of_range", Code::out_of_range)
      .value("unsupported", Code::unsupported)
      .value("data_loss", Code::data_loss)
      .value("internal", Code::internal);
  m.def(
      "code_name", [](Code c) { return std::string(code_name(c)); }, "code"_a, "INVALID_ARGUMENT, ...");

  py::enum_<DType>(m, "DType",
                   "Element types: f32 (float32), f16 (float16), bf16 (bfloat16), i32 (int32), i64 (int64), bool.")
      .value("f32", DType::f32)
      .value("i32", DType::i32)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("i64", DType::i64)
      .value("bool", DType::boolean);
  m.attr("float32") = DType::f32;
  m.attr("int32") = DType::i32;
  m.attr("float16") = DType::f16;
  m.attr("bfloat16") = DType::bf16;
  m.attr("int64") = DType::i64;
  m.attr("bool_") = DType::boolean;
  m.def(
      "dtype_name", [](const py::object& d) { return std::string(dtype_name(dtype_arg(d))); }, "dtype"_a);

  py::class_<TensorType>(m, "TensorType", "A dtype and a static shape, printed `f32 [2, 16]`.")
      .def(py::init([](const py::object& dtype, std::vector<std::int64_t> shape) {
             return TensorType{dtype_arg(dtype), Shape(std::move(shape))};
           }),
           "dtype"_a, "shape"_a)
      .def_readonly("dtype", &TensorType::dtype)
      .def_property_readonly("shape", [](const TensorType& t) { return shape_tuple(t.shape); })
      .def("__eq__", [](const TensorType& a, const TensorType& b) { return a == b; })
      .def("__hash__", [](const TensorType& t) { return py::hash(py::make_tuple(t.dtype, shape_tuple(t.shape))); })
      .def("__str__", &TensorType::to_string)
      .def("__repr__", [](const TensorType& t) { return "rml.TensorType(" + t.to_string() + ")"; });

  py::enum_<DeviceKind>(m, "DeviceKind").value("cpu", DeviceKind::cpu).value("gpu", DeviceKind::gpu);
  py::class_<Device>(m, "Device",
                     "A CPU (cpu(0), cpu(1), ... each with its own workspace and threads) or an accelerator.")
      .def(py::init([](const std::string& text) { return device_arg(py::str(text)); }), "text"_a,
           "Parses cpu, cpu:N, gpu or gpu:N.")
      .def_static("cpu", &Device::cpu, "index"_a = 0)
      .def_static("gpu", &Device::gpu, "The accelerator when this build has one, otherwise cpu(0).")
      .def_static("has_accelerator", &Device::has_accelerator)
      .def_readonly("kind", &Device::kind)
      .def_property_readonly(
          "type", [](const Device& d) { return d.is_cpu() ? "cpu" : "gpu"; },
          "'cpu' or 'gpu': the kind as text (Device.gpu() is 'cpu' on a host with no accelerator).")
      .def_readonly("index", &Device::index)
      .def("is_cpu", &Device::is_cpu)
      .def("__eq__",
           [](const Device& a, const py::object& b) {
             if (py::isinstance<Device>(b)) return a == b.cast<Device>();
             if (!py::isinstance<py::str>(b)) return false;
             const std::optional<Device> parsed = Device::parse(b.cast<std::string>());
             return parsed && a == *parsed;
           })
      .def("__hash__", [](const Device& d) { return py::hash(py::make_tuple(d.kind, d.index)); })
      .def("__str__", &Device::to_string)
      .def("__repr__", [](const Device& d) { return "rml.Device('" + d.to_string() + "')"; });
  py::implicitly_convertible<py::str, Device>();
}

void define_tensor(py::module_& m) {
  py::class_<Tensor> tensor(m, "Tensor", py::buffer_protocol(),
                            "A dense row-major tensor (f32, f16, bf16, i32, i64 or bool). np.asarray(t) shares its "
                            "memory (bf16 as uint16 bits); rml.Tensor(array) shares a C-contiguous array's memory "
                            "when its dtype is the tensor's.");
  tensor
      .def(py::init(
               [](const py::object& data, const py::object& dtype) { return to_tensor(data, optional_dtype(dtype)); }),
           "data"_a, "dtype"_a = py::none())
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("type", &Tensor::type)
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("size", &Tensor::numel)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("is_symbolic", &Tensor::is_symbolic)
      .def_property_readonly(
          "device", [](const Tensor&) { return Device::cpu(); },
          "Where the bytes are: host memory, cpu:0 (this build has no accelerator).")
      .def(
          "reshape",
          [](const Tensor& t, const py::args& args) {
            const auto dims = dims_arg(args);
            return t.is_symbolic() ? ops::reshape(t, dims) : t.reshape(dims);
          },
          "The same data under another shape (one dimension may be -1); a view, or a reshape op while tracing.")
      .def("numpy", &tensor_as_numpy,
           "A NumPy array sharing this tensor's memory (a bf16 tensor's as uint16 bit patterns).")
      .def(
          "float32", [](const py::object& self) { return numpy().attr("asarray")(tensor_values(self), "float32"); },
          "The elements as a float32 array: exact for f16 and bf16 (a new array for bf16; shared for f32).")
      // NumPy asks the buffer first; it falls back to __array__ only when there is none (a symbolic tensor),
      // and this then raises FailedPreconditionError instead of NumPy wrapping the tensor in an object array.
      .def(
          "__array__",
          [](const py::object& self, const py::object& dtype) {
            return numpy().attr("asarray")(tensor_as_numpy(self), "dtype"_a = dtype);
          },
          "dtype"_a = py::none())
      .def("tolist", [](const py::object& self) { return tensor_values(self).attr("tolist")(); })
      .def("item", [](const py::object& self) { return tensor_values(self).attr("item")(); })
      .def("clone", &Tensor::clone, "A tensor with its own copy of the bytes.")
      .def("equal", &Tensor::equal, "other"_a, "Same dtype, shape and bytes.")
      .def("__len__",
           [](const Tensor& t) {
             if (t.rank() == 0) throw py::type_error("len() of a 0-d rml.Tensor");
             return t.shape()[0];
           })
      .def("__repr__", &tensor_repr)
      .def("__reduce__",
           [](const py::object& self) {
             return py::make_tuple(py::type::of(self),
                                   py::make_tuple(tensor_as_numpy(self).attr("copy")(), self.attr("dtype")));
           })
      .def("__neg__", [](const Tensor& t) { return ops::neg(t); })
      .def("__add__", &apply_binary<&ops::add>)
      .def("__radd__", &apply_reflected<&ops::add>)
      .def("__sub__", &apply_binary<&ops::sub>)
      .def("__rsub__", &apply_reflected<&ops::sub>)
      .def("__mul__", &apply_binary<&ops::mul>)
      .def("__rmul__", &apply_reflected<&ops::mul>)
      .def("__truediv__", &apply_binary<&ops::div>)
      .def("__rtruediv__", &apply_reflected<&ops::div>)
      .def("__pow__", &apply_binary<&ops::pow>)
      .def("__matmul__", &apply_binary<&ops::matmul>)
      .def("__rmatmul__", &apply_reflected<&ops::matmul>);
  reinterpret_cast<PyTypeObject*>(tensor.ptr())->tp_as_buffer->bf_getbuffer = &tensor_getbuffer;
  // Arrays, lists and floats convert to tensors wherever a Tensor is expected (copied only when needed).
  py::implicitly_convertible<py::array, Tensor>();
  py::implicitly_convertible<py::list, Tensor>();
  py::implicitly_convertible<py::tuple, Tensor>();
  py::implicitly_convertible<py::float_, Tensor>();

  m.def(
      "tensor", [](const py::object& data, const py::object& dtype) { return to_tensor(data, optional_dtype(dtype)); },
      "data"_a, "dtype"_a = py::none(),
      "A Tensor from a Tensor, a NumPy array or nested lists; dtype defaults to f16 for float16, bool for bool, f32 "
      "for other floats and i32 for other integers (int64 included: ask for rml.int64). A C-contiguous array of the "
      "requested dtype is shared, not copied; bf16 is made from float data (rounded) or uint16 bits.");
  m.def(
      "zeros",
      [](const py::object& dtype, std::vector<std::int64_t> shape) {
        return Tensor::zeros(dtype_arg(dtype), Shape(std::move(shape)));
      },
      "dtype"_a, "shape"_a);
  m.def("to", &tensor_to, "tensor"_a, "device"_a,
        "The tensor on `device`. Tensors live in host memory, so a CPU device returns it as it is; "
        "UNSUPPORTED for an accelerator this build does not have.");
}

void define_ops(py::module_& m) {
  using Fn1 = Tensor (*)(const Tensor&);
  const std::pair<const char*, Fn1> unary[] = {
      {"neg", &ops::neg},     {"abs", &ops::abs},
      {"relu", &ops::relu},   {"sigmoid", &ops::sigmoid},
      {"tanh", &ops::tanh},   {"exp", &ops::exp},
      {"log", &ops::log},     {"sqrt", &ops::sqrt},
      {"rsqrt", &ops::rsqrt}, {"reciprocal", &ops::reciprocal},
      {"erf", &ops::erf},     {"silu", &ops::silu},
      {"sin", &ops::sin},     {"cos", &ops::cos},
      {"copy", &ops::copy},
  };
  for (const auto& [name, fn] : unary) m.def(name, fn, "x"_a);
  m.def("gelu", &ops::gelu, "x"_a, "approximate"_a = "none", "approximate: 'none' (erf form) or 'tanh'.");

  def_binary<&ops::add>(m, "add", "a + b, NumPy broadcasting.");
  def_binary<&ops::sub>(m, "sub", "a - b.");
  def_binary<&ops::mul>(m, "mul", "a * b.");
  def_binary<&ops::div>(m, "div", "a / b.");
  def_binary<&ops::pow>(m, "pow", "a ** b.");
  def_binary<&ops::maximum>(m, "maximum", "The larger of a and b, elementwise.");
  def_binary<&ops::minimum>(m, "minimum", "The smaller of a and b, elementwise.");
  def_binary<&ops::equal>(m, "equal", "1 where a == b, else 0 (f32).");
  def_binary<&ops::less>(m, "less", "1 where a < b, else 0 (f32).");
  def_binary<&ops::greater>(m, "greater", "1 where a > b, else 0 (f32).");
  def_binary<&ops::matmul>(m, "matmul", "NumPy matmul.");
  m.def("where", &ops::where, "cond"_a, "a"_a, "b"_a, "a where cond != 0, else b (broadcast together).");

  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> bias, ops::Ints strides, ops::Ints pads,
         ops::Ints dilations, std::int64_t groups) {
        return ops::conv2d(x, w, bias, {std::move(strides), std::move(pads), std::move(dilations), groups});
      },
      "x"_a, "w"_a, "bias"_a = py::none(), "strides"_a = ops::Ints{1, 1}, "pads"_a = ops::Ints{0, 0, 0, 0},
      "dilations"_a = ops::Ints{1, 1}, "groups"_a = 1,
      "NCHW convolution; w is [O, C/groups, kH, kW]; pads top, left, bottom, right.");
  m.def("max_pool2d", &ops::max_pool2d, "x"_a, "kernel"_a, "strides"_a = ops::Ints{}, "pads"_a = ops::Ints{0, 0, 0, 0});
  m.def("avg_pool2d", &ops::avg_pool2d, "x"_a, "kernel"_a, "strides"_a = ops::Ints{}, "pads"_a = ops::Ints{0, 0, 0, 0},
        "count_include_pad"_a = true);

  using Reduce = Tensor (*)(const Tensor&, const ops::Ints&, bool);
  const std::pair<const char*, Reduce> reductions[] = {
      {"sum", &ops::sum}, {"mean", &ops::mean}, {"max", &ops::max}, {"min", &ops::min}};
  for (const auto& [name, fn] : reductions)
    m.def(name, fn, "x"_a, "axes"_a = ops::Ints{}, "keepdims"_a = false, "Reduces over `axes` (empty: all).");
  m.def("softmax", &ops::softmax, "x"_a, "axis"_a = -1);
  m.def("argmax", &ops::argmax, "x"_a, "axis"_a, "keepdims"_a = false, "i32 indices of the largest elements.");

  m.def("reshape", &ops::reshape, "x"_a, "shape"_a);
  m.def("transpose", &ops::transpose, "x"_a, "perm"_a = ops::Ints{}, "perm empty: reversed axes.");
  m.def("concat", &ops::concat, "xs"_a, "axis"_a);
  m.def("slice", &ops::slice, "x"_a, "starts"_a, "ends"_a, "axes"_a = ops::Ints{}, "steps"_a = ops::Ints{});
  m.def("expand", &ops::expand, "x"_a, "shape"_a);
  m.def("pad", &ops::pad, "x"_a, "pads"_a, "value"_a = 0.0,
        "pads: the begin of every axis, then the end of every axis.");
  m.def("gather", &ops::gather, "data"_a, "indices"_a, "axis"_a = 0, "indices are i32; negative indices wrap.");
  m.def(
      "cast", [](const Tensor& x, const py::object& to) { return ops::cast(x, dtype_arg(to)); }, "x"_a, "to"_a);
}

void define_graph(py::module_& m) {
  py::enum_<OpCode> op_code(m, "OpCode", "Every op of the op set, by its CamelCase name (Relu, MatMul, ...).");
  for (std::size_t i = 0; i < op_count; ++i) {
    const auto c = static_cast<OpCode>(i);
    op_code.value(std::string(op_code_name(c)).c_str(), c);
  }
  m.def(
      "op_name", [](OpCode c) { return std::string(op_name(c)); }, "code"_a, "The snake_case name (matmul).");
  m.def(
      "op_code_name", [](OpCode c) { return std::string(op_code_name(c)); }, "code"_a, "The CamelCase name (MatMul).");
  m.def(
      "find_op", [](const std::string& name) { return find_op(name); }, "name"_a,
      "The OpCode of a snake_case op name, or None.");

  py::enum_<NodeKind>(m, "NodeKind").value("input", NodeKind::input).value("op", NodeKind::op);
  py::enum_<NameKind>(m, "NameKind")
      .value("node", NameKind::node)
      .value("input", NameKind::input)
      .value("output", NameKind::output);
  py::enum_<IoNames>(m, "IoNames")
      .value("prefix_on_collision", IoNames::prefix_on_collision)
      .value("prefix_always", IoNames::prefix_always)
      .value("keep", IoNames::keep);
  py::enum_<CrossDevice>(m, "CrossDevice").value("move", CrossDevice::move).value("refuse", CrossDevice::refuse);

  // The definitions a GraphDef is made of, as plain records (copies, not views): what a Node or a
  // Value is defined by, and what rml.serialize writes for them.
  py::class_<Origin>(m, "Origin", "Where an operator came from: the module, file and line that traced it.")
      .def(py::init([](std::string module, std::string file, std::int64_t line) {
             return Origin{std::move(module), std::move(file), line};
           }),
           "module"_a = "", "file"_a = "", "line"_a = 0)
      .def_readwrite("module", &Origin::module)
      .def_readwrite("file", &Origin::file)
      .def_readwrite("line", &Origin::line)
      .def("__eq__", [](const Origin& a, const Origin& b) { return a == b; })
      .def("__str__", &Origin::to_string)
      .def("__repr__", [](const Origin& o) {
        return "rml.Origin(" + py::repr(py::make_tuple(o.module, o.file, o.line)).cast<std::string>() + ")";
      });

  py::class_<ValueDef>(m, "ValueDef", "A value's definition: its name and type.")
      .def(py::init([](std::string name, TensorType type) {
             return ValueDef{std::move(name), std::move(type)};
           }),
           "name"_a, "type"_a)
      .def_readwrite("name", &ValueDef::name)
      .def_readwrite("type", &ValueDef::type)
      .def("__eq__", [](const ValueDef& a, const ValueDef& b) { return a == b; })
      .def("__repr__", [](const ValueDef& v) {
        return "rml.ValueDef(" + py::repr(py::str(v.name)).cast<std::string>() + ", " + v.type.to_string() + ")";
      });

  const auto ids_list = [](const ValueIds& ids) { return std::vector<ValueId>(ids.begin(), ids.end()); };
  const auto to_ids = [](const std::vector<ValueId>& ids) { return ValueIds(ids.begin(), ids.end()); };
  py::class_<NodeDef>(m, "NodeDef",
                      "An operator's definition: op name, input and output value ids, name, attributes, origin "
                      "and device. Nothing is checked until it is part of a graph.")
      .def(py::init([to_ids](std::string op, const std::vector<ValueId>& inputs, const std::vector<ValueId>& outputs,
                             std::string name, Attrs attrs, std::optional<Origin> origin, Device device) {
             return NodeDef{std::move(op),    to_ids(inputs),    to_ids(outputs), std::move(name),
                            std::move(attrs), std::move(origin), device};
           }),
           "op"_a, "inputs"_a, "outputs"_a, "name"_a = "", "attrs"_a = Attrs{}, "origin"_a = py::none(),
           "device"_a = Device{})
      .def_readwrite("op", &NodeDef::op)
      .def_property(
          "inputs", [ids_list](const NodeDef& n) { return ids_list(n.inputs); },
          [to_ids](NodeDef& n, const std::vector<ValueId>& ids) { n.inputs = to_ids(ids); })
      .def_property(
          "outputs", [ids_list](const NodeDef& n) { return ids_list(n.outputs); },
          [to_ids](NodeDef& n, const std::vector<ValueId>& ids) { n.outputs = to_ids(ids); })
      .def_readwrite("name", &NodeDef::name)
      .def_readwrite("attrs", &NodeDef::attrs)
      .def_readwrite("origin", &NodeDef::origin)
      .def_readwrite("device", &NodeDef::device)
      .def("__eq__", [](const NodeDef& a, const NodeDef& b) { return structural_equal(a, b); })
      .def("__repr__", [ids_list](const NodeDef& n) {
        return "rml.NodeDef(" + py::repr(py::str(n.op)).cast<std::string>() + ", " +
               py::repr(py::cast(ids_list(n.inputs))).cast<std::string>() + ", " +
               py::repr(py::cast(ids_list(n.outputs))).cast<std::string>() +
               ", name=" + py::repr(py::str(n.name)).cast<std::string>() + ")";
      });

  py::class_<Value>(m, "Value", "A view of a value: a graph input, a constant or an operator's output.")
      .def_property_readonly("id", &Value::id)
      .def_property_readonly("name", &Value::name)
      .def_property_readonly("type", &Value::type)
      .def_property_readonly("dtype", [](const Value& v) { return v.type().dtype; })
      .def_property_readonly("shape", [](const Value& v) { return shape_tuple(v.type().shape); })
      .def_property_readonly("is_constant", &Value::is_constant)
      .def(
          "check", [](const Value& v) { check(v.check()); },
          "Raises InvalidArgumentError once the graph no longer holds the value.")
      .def("producer", [](const Value& v) { return unwrap(v.producer()); })
      .def("consumers", [](const Value& v) { return unwrap(v.consumers()); })
      .def("__eq__", [](const Value& a, const Value& b) { return a == b; })
      .def("__hash__", [](const Value& v) { return py::hash(py::make_tuple(v.id(), v.name())); })
      .def("__repr__", [](const Value& v) { return "<rml.Value " + v.name() + ": " + v.type().to_string() + ">"; });

  py::class_<Node>(m, "Node", "A view of a graph input (NodeKind.input) or an operator (NodeKind.op).")
      .def_property_readonly("kind", &Node::kind)
      .def_property_readonly("name", &Node::name)
      .def_property_readonly(
          "op_code",
          [](const Node& n) {
            return n.op_code() == OpCode::count_ ? std::nullopt : std::optional<OpCode>(n.op_code());
          },
          "The operator's OpCode; None for an input or an op the table does not know.")
      .def_property_readonly("index", &Node::index)
      .def(
          "check", [](const Node& n) { check(n.check()); },
          "Raises InvalidArgumentError once the graph no longer holds the node.")
      .def(
          "input", [](const Node& n, std::size_t i) { return unwrap(n.input(i)); }, "i"_a)
      .def(
          "output", [](const Node& n, std::size_t i) { return unwrap(n.output(i)); }, "i"_a)
      .def("inputs", [](const Node& n) { return unwrap(n.inputs()); })
      .def("outputs", [](const Node& n) { return unwrap(n.outputs()); })
      .def(
          "attrs", [](const Node& n) { return unwrap(n.def()).attrs; }, "The operator's attributes, as a dict.")
      .def(
          "node_def", [](const Node& n) { return unwrap(n.def()); },
          "A copy of the operator's definition (rml.NodeDef); InvalidArgumentError for a graph input.")
      .def(
          "device", [](const Node& n) { return unwrap(n.def()).device; },
          "The device the operator runs on; InvalidArgumentError for a graph input.")
      .def("__eq__", [](const Node& a, const Node& b) { return a == b; })
      .def("__hash__", [](const Node& n) { return py::hash(py::make_tuple(n.index(), n.name())); })
      .def("__repr__", [](const Node& n) {
        return "<rml.Node " + n.name() + " (" +
               (n.kind() == NodeKind::input ? std::string("input") : std::string(op_code_name(n.op_code()))) + ")>";
      });

  py::class_<Edge>(m, "Edge", "One operator input: `value`, produced by `from_`, read by `to` at input `port`.")
      .def_property_readonly("from_", &Edge::from)
      .def_property_readonly("to", &Edge::to)
      .def_property_readonly("value", &Edge::value)
      .def_property_readonly("port", &Edge::port)
      .def("check", [](const Edge& e) { check(e.check()); })
      .def("__repr__", [](const Edge& e) {
        return "<rml.Edge " + e.from().name() + " -> " + e.to().name() + "[" + std::to_string(e.port()) + "]>";
      });

  py::class_<ValueCut>(m, "ValueCut", "The values the operators before a cut hand to those after it.")
      .def_readonly("values", &ValueCut::values)
      .def_readonly("bytes", &ValueCut::bytes)
      .def_readonly("before", &ValueCut::before)
      .def_readonly("flops_before", &ValueCut::flops_before)
      .def_readonly("exact", &ValueCut::exact)
      .def("__repr__", [](const ValueCut& c) {
        std::string names;
        for (const Value& v : c.values) names += (names.empty() ? "" : ", ") + v.name();
        return "<rml.ValueCut (" + names + "): " + std::to_string(c.bytes) + " bytes>";
      });

  py::class_<Rename>(m, "Rename", "A name a merge changed.")
      .def_readonly("part", &Rename::part)
      .def_readonly("kind", &Rename::kind)
      .def_readonly("from_", &Rename::from)
      .def_readonly("to", &Rename::to)
      .def("__repr__", [](const Rename& r) {
        const char* kind = r.kind == NameKind::node ? "node" : r.kind == NameKind::input ? "input" : "output";
        return "<rml.Rename " + r.part + " " + kind + " " + r.from + " -> " + r.to + ">";
      });

  py::class_<Graph>(m, "Graph",
                    "A graph: what load_graph, trace and deserialize return, and what merge, split, extract, "
                    "optimize, finalize and run work on.")
      .def_property_readonly("name", &Graph::name)
      .def_property_readonly("producer", [](const Graph& g) { return g.def().producer; })
      .def_property_readonly("finalized", &Graph::finalized)
      .def_property_readonly("consumed", &Graph::consumed)
      .def_property_readonly("device", &Graph::device)
      .def_property_readonly("metadata", [](const Graph& g) { return g.def().metadata; })
      .def(
          "value_def",
          [](const Graph& g, ValueId id) {
            const std::vector<ValueDef>& values = g.def().values;
            if (id >= values.size())
              throw Error(Code::out_of_range, "value_def: the graph has " + std::to_string(values.size()) +
                                                  " values, not " + std::to_string(id) + "+1");
            return values[id];
          },
          "id"_a, "A copy of value `id`'s definition (rml.ValueDef: its own name, empty if it has none, and type).")
      .def(
          "copy", [](const Graph& g) { return Graph(g); }, "A copy of the structure that shares the weights.")
      .def("__copy__", [](const Graph& g) { return Graph(g); })
      .def(
          "__deepcopy__", [](const Graph& g, const py::object&) { return Graph(g); }, "memo"_a)
      .def("nodes", &Graph::nodes, "Graph inputs first, then operators in order.")
      .def(
          "node", [](const Graph& g, std::string_view name) { return unwrap(g.node(name)); }, "name"_a)
      .def("find_nodes", &Graph::find_nodes, "op_code"_a)
      .def("values", &Graph::values)
      .def(
          "value", [](const Graph& g, std::string_view name) { return unwrap(g.value(name)); }, "name"_a)
      .def("edges", &Graph::edges)
      .def("input_names", &Graph::input_names)
      .def("output_names", &Graph::output_names)
      .def(
          "to", [](Graph& g, const py::object& device) { check(g.to(device_arg(device))); }, "device"_a,
          "Places every node on `device`; FailedPreconditionError once finalized.")
      .def(
          "min_value_cut",
          [](const Graph& g, double min_flops_before, double max_flops_before) {
            return unwrap(g.min_value_cut(CutOptions{min_flops_before, max_flops_before}));
          },
          "min_flops_before"_a = 0.0, "max_flops_before"_a = 1.0,
          "The cut through values that hands the fewest bytes on; the bounds limit the FLOPs share before it.")
      .def(
          "merge",
          [](Graph& first, Graph& second, const std::vector<std::pair<std::string, std::string>>& io_map) {
            if (&first == &second)
              throw Error(Code::invalid_argument, "merge: a graph cannot be merged into itself; merge a copy()");
            return unwrap(first.merge(second, io_map));
          },
          "second"_a, "io_map"_a = std::vector<std::pair<std::string, std::string>>{},
          "Merges `second` into this graph, feeding each (output, input) pair of io_map; consumes `second` and "
          "returns the names of it that changed.")
      .def("optimize", [](Graph& g) { check(g.optimize()); })
      .def(
          "finalize", [](Graph& g) { check(g.finalize()); }, "Type-checks and compiles; a finalized graph runs.")
      .def("run", &run_graph, "inputs"_a, "Runs a finalized graph on tensors or arrays; releases the GIL meanwhile.")
      .def("__repr__", &graph_repr)
      .def(py::pickle([](const Graph& g) { return py::make_tuple(graph_bytes(g)); },
                      [](const py::tuple& state) { return graph_from_buffer(state[0].cast<py::buffer>()); }));

  py::class_<TensorSpec>(m, "TensorSpec", "One input of a trace: its name, dtype and shape.")
      .def(py::init([](std::string name, const py::object& dtype, std::vector<std::int64_t> shape) {
             return TensorSpec{std::move(name), dtype_arg(dtype), Shape(std::move(shape))};
           }),
           "name"_a, "dtype"_a, "shape"_a)
      .def_readonly("name", &TensorSpec::name)
      .def_readonly("dtype", &TensorSpec::dtype)
      .def_property_readonly("shape", [](const TensorSpec& s) { return shape_tuple(s.shape); })
      .def("__repr__", [](const TensorSpec& s) {
        return "rml.TensorSpec('" + s.name + "', " + TensorType{s.dtype, s.shape}.to_string() + ")";
      });
  m.def("_trace", &trace_graph, "fn"_a, "signature"_a, "name"_a, "output_names"_a);

  m.def("_merge", &merge_parts, "parts"_a, "connections"_a, "io_names"_a, "cross_device"_a);
  m.def("_split", &split_graph, "graph"_a, "cut_or_function"_a);
  m.def(
      "_extract",
      [](Graph& graph, const std::vector<Value>& inputs, const std::vector<Value>& outputs) {
        return unwrap(extract(graph, inputs, outputs));
      },
      "graph"_a, "inputs"_a, "outputs"_a);
}

void define_io_and_serial(py::module_& m) {
  m.def(
      "load_graph",
      [](const std::filesystem::path& stem, bool mmap) {
        Result<Graph> graph = [&] {
          py::gil_scoped_release nogil;
          return load_graph(stem, LoadOptions{mmap});
        }();
        return unwrap(std::move(graph));
      },
      "stem"_a, "mmap"_a = true,
      "Loads <stem>.json and the <stem>.safetensors saved with it (weights mapped, not copied; mmap=False reads "
      "them into memory).");
  m.def(
      "save_graph", [](const Graph& g, const std::filesystem::path& stem) { check(save_graph(g, stem)); }, "graph"_a,
      "stem"_a, "Writes <stem>.json and <stem>.safetensors.");
  m.def(
      "parse_graph", [](std::string_view json) { return unwrap(parse_graph(json, nullptr)); }, "json"_a,
      "A graph from rml-graph JSON whose constants are all inline.");

  m.def("serialize", &serialize_object, "obj"_a,
        "One self-contained rml-msgpack document holding a Graph (weights included), Tensor, TensorType or Device.");
  m.def(
      "deserialize",
      [](const py::buffer& data, const py::object& type) {
        const py::buffer_info info = data.request();
        return deserialize_bytes(buffer_bytes(info), type);
      },
      "data"_a, "type"_a = py::type::of<Graph>(),
      "The `type` (rml.Graph by default, rml.Tensor, rml.TensorType, rml.Device) that serialize() wrote; "
      "InvalidArgumentError when the document holds another type, DataLossError for truncated or corrupt bytes.");
  m.def(
      "serialize_to_file",
      [](const py::object& obj, const std::filesystem::path& path) {
        visit_serializable(obj, "serialize_to_file", [&](const auto& value) { check(serialize_to_file(value, path)); });
      },
      "obj"_a, "path"_a, "Writes serialize(obj) to `path`, replacing it atomically (a failure leaves the old file).");
  m.def(
      "deserialize_from_file",
      [](const std::filesystem::path& path, const py::object& type) {
        std::string bytes;
        {
          py::gil_scoped_release nogil;
          Result<std::string> text = detail::read_file(path);
          if (!text.ok()) throw_status(text.error());
          bytes = std::move(*text);
        }
        try {
          return deserialize_bytes({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, type);
        } catch (const Error& e) {
          throw_status(e.status().with_prefix(path.string() + ": "));
        }
      },
      "path"_a, "type"_a = py::type::of<Graph>(), "The `type` that serialize_to_file wrote to `path`.");
  m.def(
      "structural_equal",
      [](const Graph& a, const Graph& b, bool map_names) {
        return structural_equal(a.def(), b.def(), EqualOptions{map_names});
      },
      "a"_a, "b"_a, "map_names"_a = false,
      "True when the graphs hold the same fields; map_names compares up to renaming values and nodes.");
  m.def(
      "assert_structural_equal",
      [](const Graph& a, const Graph& b, bool map_names) {
        check(assert_structural_equal(a.def(), b.def(), EqualOptions{map_names}));
      },
      "a"_a, "b"_a, "map_names"_a = false, "Raises InvalidArgumentError naming the first difference by path.");
}

/// `i`, checked against the executor's inputs or outputs (OUT_OF_RANGE).
std::size_t io_index(std::size_t i, const std::vector<std::string>& names, const char* what) {
  if (i >= names.size())
    throw Error(Code::out_of_range, std::string("Executor: no ") + what + " " + std::to_string(i) + "; the graph has " +
                                        std::to_string(names.size()));
  return i;
}

void define_executor(py::module_& m) {
  py::enum_<Winograd>(m, "Winograd", "The transform 3x3 stride-1 convolutions may take (docs/ops.md, Winograd).")
      .value("off", Winograd::off, "every convolution runs the direct path")
      .value("f2", Winograd::f2, "F(2x2, 3x3), within the conformance tolerance; the default")
      .value("f4", Winograd::f4, "F(4x4, 3x3): fewer multiply-adds, a larger rounding error");
  py::class_<ExecutorOptions>(m, "ExecutorOptions")
      .def(py::init([](int threads, Winograd winograd, bool widen_16bit_weights, std::int64_t parallel_min_work,
                       bool balance_threads) {
             ExecutorOptions options{threads};
             options.winograd = winograd;
             options.widen_16bit_weights = widen_16bit_weights;
             options.parallel_min_work = parallel_min_work;
             options.balance_threads = balance_threads;
             return options;
           }),
           "threads"_a = 0, "winograd"_a = Winograd::f2, "widen_16bit_weights"_a = false,
           "parallel_min_work"_a = detail::kParallelMinWork, "balance_threads"_a = true)
      .def_readwrite("threads", &ExecutorOptions::threads, "Intra-op threads, the caller included; 0 = all cores.")
      .def_readwrite("winograd", &ExecutorOptions::winograd,
                     "The Winograd transform 3x3 stride-1 convolutions with constant weights may take.")
      .def_readwrite("widen_16bit_weights", &ExecutorOptions::widen_16bit_weights,
                     "Widen f16/bf16 constant weights of matmul and conv2d to f32 once, at create.")
      .def_readwrite("parallel_min_work", &ExecutorOptions::parallel_min_work,
                     "Steps estimated below this much work run on the calling thread; 0 lets every step split.")
      .def_readwrite("balance_threads", &ExecutorOptions::balance_threads,
                     "Move each step's two-part split toward the faster thread after every run; False keeps even "
                     "halves. The outputs are the same either way.");
  py::class_<StepTime>(m, "StepTime", "One kernel step of Executor.profile: a node and the nodes fused into it.")
      .def_property_readonly(
          "op", [](const StepTime& s) { return std::string(op_name(s.op)); }, "The first node's op name.")
      .def_readonly("first_node", &StepTime::first_node, "Index of that node in the graph.")
      .def_readonly("node_count", &StepTime::node_count, "Nodes the step runs.")
      .def_readonly("output", &StepTime::output, "The step's output type.")
      .def_readonly("seconds", &StepTime::seconds, "Wall time, summed over the profiled runs.")
      .def("__repr__", [](const StepTime& s) {
        return "StepTime(" + std::string(op_name(s.op)) + " at node " + std::to_string(s.first_node) + ", " +
               std::to_string(s.node_count) + " nodes, " + s.output.to_string() + ", " + std::to_string(s.seconds) +
               " s)";
      });
  py::class_<Executor>(m, "Executor",
                       "A checked graph compiled into kernels over one planned arena; run() is thread-safe.")
      .def_static(
          "create", [](const Graph& g, const ExecutorOptions& options) { return unwrap(Executor::create(g, options)); },
          "graph"_a, "options"_a = ExecutorOptions{})
      .def(
          "run",
          [](const Executor& e, const py::iterable& inputs) {
            if (py::isinstance<py::dict>(inputs))
              throw Error(Code::invalid_argument,
                          "Executor.run: takes inputs in order (a list); for feeds by name use "
                          "rml.InferenceSession(graph).run(None, feeds)");
            std::vector<Tensor> in = run_inputs(inputs, [&](std::size_t i) -> std::optional<DType> {
              if (i >= e.input_names().size()) return std::nullopt;
              return e.input_type(i).dtype;
            });
            Result<std::vector<Tensor>> out = [&] {
              py::gil_scoped_release nogil;
              return e.run(std::span<const Tensor>(in));
            }();
            return unwrap(std::move(out));
          },
          "inputs"_a, "Runs on tensors or arrays in input order; releases the GIL meanwhile.")
      .def(
          "profile",
          [](const Executor& e, const py::iterable& inputs, int runs) {
            std::vector<Tensor> in = run_inputs(inputs, [&](std::size_t i) -> std::optional<DType> {
              if (i >= e.input_names().size()) return std::nullopt;
              return e.input_type(i).dtype;
            });
            Result<std::vector<StepTime>> steps = [&] {
              py::gil_scoped_release nogil;
              return e.profile(std::span<const Tensor>(in), runs);
            }();
            return unwrap(std::move(steps));
          },
          "inputs"_a, "runs"_a = 10,
          "Runs `runs` times after one untimed run and returns each kernel step's time, in run order.")
      .def_property_readonly("step_count", &Executor::step_count, "Kernel steps per run, after fusion.")
      .def_property_readonly("input_names", &Executor::input_names)
      .def_property_readonly("output_names", &Executor::output_names)
      .def(
          "input_type",
          [](const Executor& e, std::size_t i) { return e.input_type(io_index(i, e.input_names(), "input")); }, "i"_a)
      .def(
          "output_type",
          [](const Executor& e, std::size_t i) { return e.output_type(io_index(i, e.output_names(), "output")); },
          "i"_a)
      .def_property_readonly("arena_bytes", &Executor::arena_bytes)
      .def_property_readonly("threads", &Executor::threads);
}

// ---------------------------------------------------------------------------------------------
// InferenceSession: ONNX Runtime's Python API over rml::InferenceSession

/// The NumPy dtype a feed of `d` must have (bf16: its uint16 bit patterns, as np.asarray gives them).
const char* numpy_name(DType d) {
  switch (d) {
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "uint16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::boolean:
      return "bool";
    default:
      return "float32";
  }
}

/// `value` as the tensor for input `name` of type `want`, never converted: an array of another dtype is
/// refused rather than narrowed, a non-contiguous one rather than silently copied. A C-contiguous,
/// aligned array is wrapped, not copied; a misaligned one is copied (alignment is rml's business).
Tensor feed_tensor(const std::string& name, const py::handle& value, const TensorType& want, bool writable) {
  const std::string where = std::string(writable ? "run_into: output '" : "run: input '") + name + "'";
  if (py::isinstance<Tensor>(value)) return value.cast<Tensor>();  // the session checks its type
  py::array array = numpy().attr("asarray")(value);
  check_numeric(array, where.c_str());
  const py::dtype expected = py::dtype(numpy_name(want.dtype));
  if (!array.dtype().equal(expected))
    throw Error(Code::invalid_argument, where + " must be " + numpy_name(want.dtype) + " (" + want.to_string() +
                                            "), got " + std::string(py::str(array.dtype())) +
                                            "; rml converts nothing: pass .astype(numpy." + numpy_name(want.dtype) +
                                            ")");
  if (!(array.flags() & py::array::c_style))
    throw Error(Code::invalid_argument,
                where + " is not C-contiguous; pass numpy.ascontiguousarray(...) (rml reads it in place)");
  if (writable && !array.writeable()) throw Error(Code::invalid_argument, where + " is read-only");
  if (reinterpret_cast<std::uintptr_t>(array.data()) % element_size(want.dtype) != 0) {
    if (writable) throw Error(Code::invalid_argument, where + " is not aligned to its element size");
    array = array.attr("copy")();
  }
  std::vector<std::int64_t> dims(array.shape(), array.shape() + array.ndim());
  return Tensor::view(TensorType{want.dtype, Shape(std::move(dims))}, std::make_shared<NumpyStorage>(std::move(array)),
                      0);
}

/// A {name: array} mapping as named tensors, every name a str.
NamedTensors named_tensors(const py::handle& mapping, const std::vector<NodeArg>& args, bool writable,
                           const char* what) {
  if (!py::isinstance<py::dict>(mapping))
    throw py::type_error(std::string(what) + ": takes a dict {name: numpy array}, got " +
                         std::string(py::str(py::type::of(mapping).attr("__name__"))));
  NamedTensors out;
  for (const auto& [key, value] : mapping.cast<py::dict>()) {
    if (!py::isinstance<py::str>(key))
      throw py::type_error(std::string(what) + ": names must be str, got " +
                           std::string(py::str(py::type::of(key).attr("__name__"))));
    const auto name = key.cast<std::string>();
    const auto arg = std::find_if(args.begin(), args.end(), [&](const NodeArg& a) { return a.name == name; });
    // An unknown name: the session's own message lists the names it has.
    out.emplace(name, arg == args.end() ? Tensor() : feed_tensor(name, value, arg->type, writable));
  }
  return out;
}

/// ONNX Runtime's type strings: tensor(float), tensor(float16), tensor(bfloat16), tensor(int32), tensor(int64),
/// tensor(bool).
std::string node_arg_type(const NodeArg& a) {
  switch (a.type.dtype) {
    case DType::f16:
      return "tensor(float16)";
    case DType::bf16:
      return "tensor(bfloat16)";
    case DType::i32:
      return "tensor(int32)";
    case DType::i64:
      return "tensor(int64)";
    case DType::boolean:
      return "tensor(bool)";
    default:
      return "tensor(float)";
  }
}

void define_session(py::module_& m) {
  py::class_<NodeArg>(m, "NodeArg", "An input or output of a session: .name, .shape, .type (as ONNX Runtime's).")
      .def_readonly("name", &NodeArg::name)
      .def_property_readonly(
          "shape", [](const NodeArg& a) { return std::vector<std::int64_t>(a.type.shape.begin(), a.type.shape.end()); })
      .def_property_readonly("type", &node_arg_type, "ONNX Runtime's type string: tensor(float), tensor(int64), ...")
      .def_property_readonly(
          "dtype", [](const NodeArg& a) { return py::dtype(numpy_name(a.type.dtype)); },
          "The NumPy dtype a feed must have.")
      .def_property_readonly("tensor_type", [](const NodeArg& a) { return a.type; })
      .def("__repr__", [](const NodeArg& a) {
        return "NodeArg(name='" + a.name + "', type='" + node_arg_type(a) + "', shape=" + a.type.shape.to_string() +
               ")";
      });

  py::class_<InferenceSession>(
      m, "InferenceSession",
      "A model compiled for running, fed by name (ONNX Runtime's API): run(output_names, {name: array}).")
      .def(py::init([](const py::object& model, int threads, const py::object& providers) {
             if (!providers.is_none())
               for (const py::handle& p : providers) {
                 const std::string name = py::str(py::isinstance<py::tuple>(p) ? p.cast<py::tuple>()[0] : p);
                 if (name != "CPUExecutionProvider")
                   throw Error(Code::unsupported, "InferenceSession: rml runs on the CPU only; provider " + name +
                                                      " is not available (pass CPUExecutionProvider or nothing)");
               }
             SessionOptions options;
             options.threads = threads;
             if (py::isinstance<Graph>(model))
               return unwrap(InferenceSession::create(model.cast<const Graph&>(), options));
             const auto path = py::module_::import("os").attr("fspath")(model).cast<std::string>();
             Result<InferenceSession> session = [&] {
               py::gil_scoped_release nogil;
               return InferenceSession::create(std::filesystem::path(path), options);
             }();
             return unwrap(std::move(session));
           }),
           "model"_a, "threads"_a = 0, "providers"_a = py::none(),
           "`model`: an rml-graph stem or .json path, a .msgpack file, or an rml.Graph. `threads`: intra-op threads "
           "(0 = all cores), on the process's shared pool.")
      .def("get_inputs", &InferenceSession::inputs)
      .def("get_outputs", &InferenceSession::outputs)
      .def("get_providers", [](const InferenceSession&) { return std::vector<std::string>{"CPUExecutionProvider"}; })
      .def(
          "run",
          [](const InferenceSession& s, const py::object& output_names, const py::object& input_feed,
             const py::object&) {
            NamedTensors feeds = named_tensors(input_feed, s.inputs(), false, "run");
            std::vector<std::string> names;
            if (!output_names.is_none()) names = output_names.cast<std::vector<std::string>>();
            Result<NamedTensors> out = [&] {
              py::gil_scoped_release nogil;
              return s.run(feeds, names);
            }();
            NamedTensors results = unwrap(std::move(out));
            py::list arrays;
            if (names.empty())
              for (const NodeArg& a : s.outputs()) names.push_back(a.name);
            for (const std::string& name : names) arrays.append(tensor_as_numpy(py::cast(results.at(name))));
            return arrays;
          },
          "output_names"_a, "input_feed"_a, "run_options"_a = py::none(),
          "Runs on {name: array} and returns the outputs named (all when None) as NumPy arrays, in that order. "
          "Arrays are read in place and never converted; the outputs own their memory. Releases the GIL.")
      .def(
          "run_into",
          [](const InferenceSession& s, const py::object& input_feed, const py::object& outputs) {
            NamedTensors feeds = named_tensors(input_feed, s.inputs(), false, "run_into");
            NamedTensors out = named_tensors(outputs, s.outputs(), true, "run_into");
            Status st = [&] {
              py::gil_scoped_release nogil;
              return s.run_into(feeds, out);
            }();
            check(st);
          },
          "input_feed"_a, "outputs"_a,
          "Runs into preallocated, C-contiguous, writable arrays {output name: array} in place; outputs left out "
          "are computed and dropped.")
      .def_property_readonly("threads", [](const InferenceSession& s) { return s.executor().threads(); });
}
}  // namespace
}  // namespace rml::python

PYBIND11_MODULE(_rml, m) {
  using namespace rml::python;
  m.doc() = "rml's C++ core; import `rml` rather than this module.";
  m.attr("__version__") = std::to_string(RML_VERSION_MAJOR) + "." + std::to_string(RML_VERSION_MINOR) + "." +
                          std::to_string(RML_VERSION_PATCH);
  define_core(m);
  define_errors(m);
  define_tensor(m);
  define_ops(m);
  define_graph(m);
  define_io_and_serial(m);
  define_executor(m);
  define_session(m);
}
