// rml::dist::Pipeline: one graph run as a pipeline of k stages over the ranks of an MPI
// communicator, micro-batches streaming through. Optional: not part of rml.hpp; link rml::mpi.
//
// Every rank loads the same model and calls Pipeline::create (collective): the ranks check that
// they hold the same graph (a 64-bit fingerprint of the graph's JSON text and weight bytes,
// exchanged with MPI_Iallgather), each computes the same split_stages plan, and rank s keeps stage
// s with an Executor of its own. run() (collective) streams micro-batches: rank 0 feeds stage 0,
// each stage receives the values crossing the cut before it into preallocated double-buffered
// tensors (MPI_Irecv posted one micro-batch ahead, so a transfer overlaps the stage's compute),
// runs its Executor into the send buffer (run_into, no copies of its own outputs), forwards the
// carried values it does not compute, and sends on (MPI_Isend). The last stage sends the graph's
// outputs to the output rank.
//
// On the wire, one message per micro-batch and cut (tag 1 between stages, 2 to the output rank):
// a 64-byte header (magic, kind = data/end/error, micro-batch index, origin rank, status code,
// payload bytes), then each carried value's raw bytes in StagePlan::carried order, each starting on
// a 64-byte boundary. An error message carries the status text instead. No serialization: both
// sides know every type from the plan; the ranks must share a byte order (checked: the fingerprint
// covers weight bytes, which differ across byte orders).
//
// Failures: every wait polls with MPI_Test against a deadline (options.timeout), never blocks.
// A stage that fails (bad input, an Executor status, the fault hook) sends an error message down
// the pipeline in place of the micro-batch, and a control message (tag 3) to the ranks before it;
// every rank then returns a Status naming the failed rank, its stage, the micro-batch and the
// cause. A rank that hears nothing within the timeout returns DATA_LOSS naming the peer it waited
// for, and tells the others. The communicator is set to MPI_ERRORS_RETURN, so MPI errors come back
// as codes, reported the same way. A pipeline that failed stays failed (FAILED_PRECONDITION).
// After a rank died, MPI_Finalize would wait for it forever: MpiSession::abandon() skips it.
#pragma once

// Only MPI's C API is used: keep the deprecated C++ bindings (and their warnings) out.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rml/io/detail/content_hash.hpp"
#include "rml/rml.hpp"

namespace rml::dist {

/// A 64-bit fingerprint of a graph: its rml-graph JSON text and every constant's bytes, each
/// framed by its length, through the content hash that save_graph's pair id uses (its first lane).
/// Equal graphs loaded from equal files give equal fingerprints on any rank of the same byte order.
inline Result<std::uint64_t> fingerprint(const Graph& graph) {
  const GraphDef& def = graph.def();
  RML_ASSIGN_OR_RETURN(detail::ConstantLayout layout, detail::layout_constants(def));
  RML_ASSIGN_OR_RETURN(std::string json, graph_to_json(def, layout));
  detail::ContentHash hash;
  hash.update_u64(json.size());
  hash.update(json.data(), json.size());
  for (const ConstantDef& c : def.constants) {
    const std::span<const std::byte> bytes = c.data.bytes();
    hash.update_u64(bytes.size());
    hash.update(bytes.data(), bytes.size());
  }
  return hash.digest()[0];
}

/// How Pipeline::create splits and runs.
struct PipelineOptions {
  /// Stages (each on the rank of its index); 0: one per rank of the communicator.
  int stages = 0;
  /// The rank where run() returns the outputs (inputs are always given on rank 0).
  int output_rank = 0;
  /// Executor threads per rank.
  int threads = 1;
  /// The longest any rank waits for a peer before it reports the peer as lost.
  std::chrono::milliseconds timeout{60000};
  /// Per-operator costs for the split (see StageOptions); empty: estimated FLOPs.
  std::vector<double> op_cost;
  /// No cut may carry more bytes than this.
  std::uint64_t max_cut_bytes = std::numeric_limits<std::uint64_t>::max();
  /// Test hook, called on a stage's rank before it computes a micro-batch: a non-OK status fails
  /// the stage there as an Executor status would.
  std::function<Status(int stage, std::uint64_t micro_batch)> fault;
};

/// What one rank did in its last run().
struct PipelineStats {
  std::uint64_t micro_batches = 0;
  /// Bytes of the messages this rank received from the stage before it (or, on the output rank,
  /// from the last stage), headers and alignment included, as MPI_Get_count reports them.
  std::uint64_t bytes_received = 0;
  double seconds = 0, compute_seconds = 0;
};

namespace detail {

enum class MessageKind : std::uint32_t { data = 1, end = 2, error = 3 };
inline constexpr std::uint32_t kMagic = 0x504c4d52;  // "RMLP"
inline constexpr int kDataTag = 1, kOutputTag = 2, kControlTag = 3;
inline constexpr std::size_t kHeaderBytes = 64, kErrorTextBytes = 960;

struct Header {
  std::uint32_t magic = kMagic;
  MessageKind kind = MessageKind::data;
  std::uint64_t micro_batch = 0;
  std::int32_t origin = 0;  // the rank that failed, for an error
  std::int32_t code = 0;
  std::uint64_t payload_bytes = 0;
  char pad[kHeaderBytes - 32] = {};
};
static_assert(sizeof(Header) == kHeaderBytes);

/// A status message: header + text, for errors in band and on the control tag.
struct ErrorMessage {
  Header header;
  char text[kErrorTextBytes] = {};
};

inline ErrorMessage make_error(const Status& status, int origin, std::uint64_t micro_batch) {
  ErrorMessage m;
  m.header.kind = MessageKind::error;
  m.header.origin = origin;
  m.header.code = static_cast<std::int32_t>(status.code());
  m.header.micro_batch = micro_batch;
  const std::string& text = status.message();
  const std::size_t n = std::min(text.size(), kErrorTextBytes - 1);
  std::memcpy(m.text, text.data(), n);
  m.header.payload_bytes = n;
  return m;
}

inline Status status_of(const Header& header, const char* text, std::size_t capacity) {
  const std::size_t n = std::min<std::size_t>(header.payload_bytes, capacity);
  const auto code = header.code > 0 && header.code <= static_cast<std::int32_t>(Code::internal)
                        ? static_cast<Code>(header.code)
                        : Code::internal;
  return {code, std::string(text, n)};
}

inline std::string mpi_error_text(int err) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(err, text, &n) != MPI_SUCCESS) return "MPI error " + std::to_string(err);
  return std::string(text, static_cast<std::size_t>(n));
}

/// One message's memory: a header, then each carried value at a 64-byte boundary, as tensors
/// viewing the buffer.
struct WireBuffer {
  std::shared_ptr<BufferStorage> storage;
  std::vector<Tensor> values;
  std::size_t bytes = 0;          // header + payloads (+ alignment)
  std::size_t payload_bytes = 0;  // the values alone

  static WireBuffer make(const std::vector<TensorType>& types) {
    WireBuffer b;
    std::vector<std::size_t> offsets;
    std::size_t at = kHeaderBytes;
    for (const TensorType& t : types) {
      offsets.push_back(at);
      const auto n = static_cast<std::size_t>(t.checked_nbytes().value_or(0));
      b.payload_bytes += n;
      at += (n + 63) / 64 * 64;
    }
    b.bytes = std::max(at, sizeof(ErrorMessage));
    b.storage = BufferStorage::allocate(b.bytes);
    for (std::size_t i = 0; i < types.size(); ++i) b.values.push_back(Tensor::view(types[i], b.storage, offsets[i]));
    return b;
  }
  [[nodiscard]] std::byte* data() const { return b_data(); }
  [[nodiscard]] Header& header() const { return *reinterpret_cast<Header*>(b_data()); }

 private:
  [[nodiscard]] std::byte* b_data() const { return storage->data(); }
};

}  // namespace detail

namespace detail {

/// One rank's state; MPI requests point into it, so it never moves (Pipeline owns it).
class PipelineRank {
 public:
  PipelineRank() = default;
  PipelineRank(const PipelineRank&) = delete;
  PipelineRank& operator=(const PipelineRank&) = delete;
  ~PipelineRank() { release(); }

  /// Collective: every rank of `comm` calls it with its own copy of the model (or the status of
  /// loading it, so that a rank that could not load is reported everywhere). MPI must be
  /// initialized (MPI_THREAD_FUNNELED or more when threads > 1).
  ///
  /// Errors, identical on every rank: the first failing rank's status (prefixed `rank r: `);
  /// INVALID_ARGUMENT naming the ranks whose graph differs from rank 0's, or whose options do;
  /// DATA_LOSS when a rank does not answer within the timeout.
  Status create(MPI_Comm comm, const Result<Graph>& graph, const PipelineOptions& options) {
    PipelineRank& p = *this;
    p.options_ = options;
    p.deadline_span_ = options.timeout;
    MPI_Request dup_request = MPI_REQUEST_NULL;
    if (int err = MPI_Comm_idup(comm, &p.comm_, &dup_request); err != MPI_SUCCESS)
      return internal_error("Pipeline::create: MPI_Comm_idup: " + detail::mpi_error_text(err));
    MPI_Comm_set_errhandler(p.comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &p.rank_);
    MPI_Comm_size(comm, &p.size_);
    RML_RETURN_IF_ERROR(p.wait_plain(dup_request, "the communicator's duplicate"));

    // Round 1: the graph's fingerprint and the options, from every rank.
    Status local;
    std::uint64_t print = 0;
    const int k = options.stages > 0 ? options.stages : p.size_;
    if (!graph.ok()) {
      local = graph.status();
    } else if (auto f = fingerprint(*graph); !f.ok()) {
      local = f.status();
    } else {
      print = *f;
    }
    if (local.ok() && (k < 1 || k > p.size_))
      local = invalid_argument("PipelineOptions::stages is " + std::to_string(k) + " for " + std::to_string(p.size_) +
                               " ranks");
    if (local.ok() && (options.output_rank < 0 || options.output_rank >= p.size_))
      local = invalid_argument("PipelineOptions::output_rank " + std::to_string(options.output_rank) +
                               " is not a rank of the communicator");
    if (local.ok() && options.timeout.count() <= 0) local = invalid_argument("PipelineOptions::timeout must be > 0");
    const std::uint64_t shape = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k)) << 32) ^
                                static_cast<std::uint32_t>(options.output_rank);
    RML_RETURN_IF_ERROR(p.agree(local, {print, shape}, "the model and options"));

    // Every rank plans the same split and keeps its own stage.
    p.stages_ = k;
    local = p.build(*graph);
    RML_RETURN_IF_ERROR(p.agree(local, {0, 0}, "the stages"));
    p.ready_ = true;
    return {};
  }

  /// Collective: streams `batches` (given on rank 0: batches[m] holds micro-batch m's inputs in the
  /// graph's input order; ignored elsewhere) through the pipeline. Returns on the output rank the
  /// graph's outputs of every micro-batch, in order; elsewhere an empty list.
  ///
  /// Errors, on every rank of the pipeline: the failing rank's status, prefixed with `rank r (stage
  /// s), micro-batch m: `; DATA_LOSS when a rank waited longer than the timeout; FAILED_PRECONDITION
  /// after an earlier failure.
  Result<std::vector<std::vector<Tensor>>> run(std::span<const std::vector<Tensor>> batches) {
    if (comm_ == MPI_COMM_NULL || !ready_)
      return failed_precondition("Pipeline::run: the pipeline failed earlier (or was moved from)");
    results_.clear();
    stats_ = {};
    const auto start = std::chrono::steady_clock::now();
    Status status = run_all(batches);
    stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    abandon();  // cancels the receives posted one micro-batch ahead
    if (!status.ok()) {
      ready_ = false;
      return status;
    }
    return std::move(results_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int stages() const noexcept { return stages_; }
  /// The stage this rank runs, or -1 for a rank beyond the stages.
  [[nodiscard]] int stage() const noexcept { return rank_ < stages_ ? rank_ : -1; }
  /// The plan every rank follows (the same everywhere).
  [[nodiscard]] const StagePlan& plan() const noexcept { return plan_; }
  [[nodiscard]] const PipelineStats& stats() const noexcept { return stats_; }
  /// Bytes of one message on the cut before stage s (1 <= s < stages), or to the output rank (s = stages).
  [[nodiscard]] std::size_t message_bytes(int s) const { return detail::WireBuffer::make(types_of(s)).bytes; }

 private:
  using Header = detail::Header;

  // ---- creation ----

  Status build(const Graph& graph) {
    Graph copy = graph;
    RML_ASSIGN_OR_RETURN(StageSplit split, split_stages(copy, {.stages = static_cast<std::size_t>(stages_),
                                                               .op_cost = options_.op_cost,
                                                               .max_cut_bytes = options_.max_cut_bytes}));
    plan_ = std::move(split.plan);
    for (ValueId v : plan_.carried.back())
      for (const ConstantDef& c : graph.def().constants)
        if (c.value == v)
          return unsupported("the graph output '" + graph.def().values[v].name +
                             "' is a constant; a pipeline carries computed values only");
    for (std::size_t s = 0; s < plan_.carried.size(); ++s) {
      types_.emplace_back();
      for (ValueId v : plan_.carried[s]) types_.back().push_back(graph.def().values[v].type);
    }
    if (stage() < 0) return {};
    Stage& mine = split.stages[static_cast<std::size_t>(stage())];
    RML_ASSIGN_OR_RETURN(Executor e, Executor::create(mine.graph, {.threads = options_.threads}));
    executor_.emplace(std::move(e));
    stage_inputs_ = mine.inputs;
    stage_outputs_ = mine.outputs;
    return {};
  }

  [[nodiscard]] std::vector<TensorType> types_of(int link) const { return types_[static_cast<std::size_t>(link)]; }

  /// Collective over the whole communicator, bounded by the timeout: every rank's status, and two
  /// words that must agree with rank 0's. OK only when all ranks are OK and agree.
  Status agree(const Status& local, std::array<std::uint64_t, 2> words, const std::string& what) {
    struct Record {
      std::uint64_t words[2];
      std::int32_t code;
      char text[500];
    };
    Record mine{};
    mine.words[0] = words[0];
    mine.words[1] = words[1];
    mine.code = static_cast<std::int32_t>(local.code());
    const std::size_t n = std::min(local.message().size(), sizeof(mine.text) - 1);
    std::memcpy(mine.text, local.message().data(), n);
    std::vector<Record> all(static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    if (int err =
            MPI_Iallgather(&mine, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record), MPI_BYTE, comm_, &request);
        err != MPI_SUCCESS)
      return internal_error("Pipeline::create: MPI_Iallgather: " + detail::mpi_error_text(err));
    RML_RETURN_IF_ERROR(wait_plain(request, what + " of every rank"));
    for (int r = 0; r < size_; ++r) {
      const Record& rec = all[static_cast<std::size_t>(r)];
      if (rec.code != 0) {
        Header h;
        h.code = rec.code;
        h.payload_bytes = std::strlen(rec.text);
        return detail::status_of(h, rec.text, sizeof(rec.text))
            .with_prefix("Pipeline::create: rank " + std::to_string(r) + ": ");
      }
    }
    std::string differ_graph, differ_options;
    for (int r = 1; r < size_; ++r) {
      const Record& rec = all[static_cast<std::size_t>(r)];
      if (rec.words[0] != all[0].words[0]) differ_graph += (differ_graph.empty() ? "" : ", ") + std::to_string(r);
      if (rec.words[1] != all[0].words[1]) differ_options += (differ_options.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!differ_graph.empty())
      return invalid_argument("Pipeline::create: rank(s) " + differ_graph +
                              " hold a different graph from rank 0's (graph and weight fingerprints differ)");
    if (!differ_options.empty())
      return invalid_argument("Pipeline::create: rank(s) " + differ_options +
                              " were given other stages or output_rank than rank 0");
    return {};
  }

  // ---- waiting ----

  using Clock = std::chrono::steady_clock;

  /// Polls `request` until it completes or the deadline passes; meanwhile takes control messages
  /// (another rank's failure ends the wait) and, with `serve_outputs`, arriving outputs. Never
  /// blocks in MPI.
  Status wait(MPI_Request& request, MPI_Status* status, const std::string& what, int peer, bool serve_outputs = true) {
    const auto deadline = Clock::now() + deadline_span_;
    for (unsigned spins = 0;; ++spins) {
      int done = 0;
      if (int err = MPI_Test(&request, &done, status ? status : MPI_STATUS_IGNORE); err != MPI_SUCCESS)
        return fail_local(internal_error("MPI_Test on " + what + ": " + detail::mpi_error_text(err)));
      if (done) return {};
      RML_RETURN_IF_ERROR(poll_control());
      if (serve_outputs) RML_RETURN_IF_ERROR(poll_output());
      if (Clock::now() > deadline) {
        Status lost(Code::data_loss, "rank " + std::to_string(rank_) + " waited " +
                                         std::to_string(deadline_span_.count()) + " ms for " + what +
                                         (peer >= 0 ? " rank " + std::to_string(peer) : std::string()) +
                                         ": the peer died, hung, or is slower than PipelineOptions::timeout");
        tell_everyone(lost);
        return lost;
      }
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 500 : 50));
    }
  }

  /// For create: a wait with no pipeline traffic to watch.
  Status wait_plain(MPI_Request& request, const std::string& what) {
    const auto deadline = Clock::now() + deadline_span_;
    for (unsigned spins = 0;; ++spins) {
      int done = 0;
      if (int err = MPI_Test(&request, &done, MPI_STATUS_IGNORE); err != MPI_SUCCESS)
        return internal_error("Pipeline::create: waiting for " + what + ": " + detail::mpi_error_text(err));
      if (done) return {};
      if (Clock::now() > deadline)
        return Status(Code::data_loss, "Pipeline::create: rank " + std::to_string(rank_) + " waited " +
                                           std::to_string(deadline_span_.count()) + " ms for " + what +
                                           ": a rank died, hung or never called create");
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 500 : 50));
    }
  }

  /// A control message (another rank's failure) ends the run with that failure.
  Status poll_control() {
    if (control_request_ == MPI_REQUEST_NULL) return {};
    int done = 0;
    MPI_Test(&control_request_, &done, MPI_STATUS_IGNORE);
    if (!done) return {};
    control_request_ = MPI_REQUEST_NULL;
    return detail::status_of(control_->header, control_->text, sizeof(control_->text));
  }

  // ---- failing ----

  /// This rank failed: tell the ranks before it (control) and after it (in band), return the status.
  Status fail_local(Status status, std::uint64_t micro_batch = 0) {
    tell_everyone(status, micro_batch);
    return status;
  }

  /// Best effort, never waits: the failure to every other rank of the pipeline, on the control
  /// tag, and in band to the next one.
  void tell_everyone(const Status& status, std::uint64_t micro_batch = 0) {
    told_ = std::make_unique<detail::ErrorMessage>(detail::make_error(status, rank_, micro_batch));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || !(r < stages_ || r == options_.output_rank)) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      if (MPI_Isend(told_.get(), sizeof(detail::ErrorMessage), MPI_BYTE, r, detail::kControlTag, comm_, &req) ==
          MPI_SUCCESS)
        leaked_.push_back(req);
    }
  }

  /// After a failure: cancel the receives still posted; sends that may never match are left to MPI
  /// (their buffers stay alive with this object).
  void abandon() {
    for (MPI_Request* r : {&in_request_[0], &in_request_[1], &sink_request_[0], &sink_request_[1], &control_request_}) {
      if (*r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(r);
      int done = 0;
      for (int i = 0; i < 1000 && !done; ++i) MPI_Test(r, &done, MPI_STATUS_IGNORE);
      if (*r != MPI_REQUEST_NULL) MPI_Request_free(r);
    }
    // Sends still under way read their buffers until they complete: give them a moment (a live
    // peer takes them), and keep the buffers of any that do not for the life of the process, so
    // that a late transfer never reads freed memory.
    std::vector<MPI_Request*> sends{&out_request_[0], &out_request_[1]};
    for (MPI_Request& r : leaked_) sends.push_back(&r);
    const auto grace = Clock::now() + std::min(deadline_span_, std::chrono::milliseconds(1000));
    bool pending = true;
    while (pending) {
      pending = false;
      for (MPI_Request* r : sends) {
        int done = 0;
        if (*r != MPI_REQUEST_NULL) MPI_Test(r, &done, MPI_STATUS_IGNORE);
        pending = pending || *r != MPI_REQUEST_NULL;
      }
      if (!pending || Clock::now() > grace) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (pending) {
      static std::vector<std::shared_ptr<const void>> kept;  // deliberately never freed
      for (MPI_Request* r : sends)
        if (*r != MPI_REQUEST_NULL) MPI_Request_free(r);
      for (detail::WireBuffer& b : out_) kept.push_back(b.storage);
      kept.push_back(std::shared_ptr<const void>(std::move(told_)));
      kept.push_back(std::shared_ptr<const void>(std::move(in_band_)));
    }
    leaked_.clear();
  }

  void release() {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (finalized || comm_ == MPI_COMM_NULL) return;
    abandon();
    MPI_Comm_free(&comm_);
  }

  // ---- the stream ----

  [[nodiscard]] bool output_is_remote() const { return options_.output_rank != stages_ - 1; }

  Status post_receive(int slot) {
    const int from = rank_ - 1;
    detail::WireBuffer& b = in_[static_cast<std::size_t>(slot)];
    if (int err =
            MPI_Irecv(b.data(), static_cast<int>(b.bytes), MPI_BYTE, from, detail::kDataTag, comm_, &in_request_[slot]);
        err != MPI_SUCCESS)
      return internal_error("MPI_Irecv: " + detail::mpi_error_text(err));
    return {};
  }

  Status post_sink(int slot) {
    detail::WireBuffer& b = sink_[static_cast<std::size_t>(slot)];
    if (int err = MPI_Irecv(b.data(), static_cast<int>(b.bytes), MPI_BYTE, stages_ - 1, detail::kOutputTag, comm_,
                            &sink_request_[slot]);
        err != MPI_SUCCESS)
      return internal_error("MPI_Irecv: " + detail::mpi_error_text(err));
    return {};
  }

  /// On the output rank when the last stage is elsewhere: takes every output message that has
  /// arrived, in order.
  Status poll_output() {
    if (!sink_open_) return {};
    for (;;) {
      const int slot = static_cast<int>(sink_next_ % 2);
      int done = 0;
      MPI_Status st;
      MPI_Test(&sink_request_[slot], &done, &st);
      if (!done) return {};
      RML_RETURN_IF_ERROR(take_output(slot, st));
      if (!sink_open_) return {};
    }
  }

  Status take_output(int slot, const MPI_Status& st) {
    detail::WireBuffer& b = sink_[static_cast<std::size_t>(slot)];
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    stats_.bytes_received += static_cast<std::uint64_t>(count);
    const Header h = b.header();
    if (h.magic != detail::kMagic) return data_loss("rank " + std::to_string(rank_) + ": a malformed message");
    if (h.kind == detail::MessageKind::error) {
      sink_open_ = false;
      return detail::status_of(h, reinterpret_cast<const char*>(b.data()) + detail::kHeaderBytes,
                               b.bytes - detail::kHeaderBytes);
    }
    if (h.kind == detail::MessageKind::end) {
      sink_open_ = false;
      return {};
    }
    if (h.micro_batch != sink_next_)
      return data_loss("rank " + std::to_string(rank_) + ": outputs of micro-batch " + std::to_string(h.micro_batch) +
                       " arrived where " + std::to_string(sink_next_) + " was due");
    std::vector<Tensor> outs;
    for (const Tensor& t : b.values) outs.push_back(t.clone());
    results_.push_back(std::move(outs));
    ++sink_next_;
    return post_sink(slot);
  }

  /// Checks micro-batch m's inputs on rank 0 against the graph's input types.
  Status check_batch(const std::vector<Tensor>& batch) const {
    const auto& types = types_[0];
    if (batch.size() != types.size())
      return invalid_argument("the graph takes " + std::to_string(types.size()) + " inputs, got " +
                              std::to_string(batch.size()));
    for (std::size_t i = 0; i < types.size(); ++i)
      if (!batch[i].defined() || batch[i].type() != types[i])
        return invalid_argument("input " + std::to_string(i) + " must be " + types[i].to_string() + ", got " +
                                (batch[i].defined() ? batch[i].type().to_string() : std::string("no data")));
    return {};
  }

  static std::size_t index_of(const std::vector<ValueId>& list, ValueId v) {
    return static_cast<std::size_t>(std::find(list.begin(), list.end(), v) - list.begin());
  }

  Status run_all(std::span<const std::vector<Tensor>> batches) {
    const int s = stage();
    const bool is_output = rank_ == options_.output_rank;
    sink_open_ = is_output && output_is_remote();
    sink_next_ = 0;
    if (sink_open_) {
      sink_ = {detail::WireBuffer::make(types_of(stages_)), detail::WireBuffer::make(types_of(stages_))};
      RML_RETURN_IF_ERROR(post_sink(0));
      RML_RETURN_IF_ERROR(post_sink(1));
    }
    if (s < 0 && !is_output) return {};
    if (control_request_ == MPI_REQUEST_NULL)
      MPI_Irecv(control_.get(), sizeof(detail::ErrorMessage), MPI_BYTE, MPI_ANY_SOURCE, detail::kControlTag, comm_,
                &control_request_);
    if (s >= 0) RML_RETURN_IF_ERROR(run_stage(s, batches));
    while (sink_open_) {  // the output rank drains what the last stage still sends
      const int slot = static_cast<int>(sink_next_ % 2);
      MPI_Status st;
      // Not through poll_output: it would take (and re-post) the very request waited on here.
      RML_RETURN_IF_ERROR(wait(sink_request_[slot], &st,
                               "the outputs of micro-batch " + std::to_string(sink_next_) + " from", stages_ - 1,
                               false));
      RML_RETURN_IF_ERROR(take_output(slot, st));
    }
    return {};
  }

  Status run_stage(int s, std::span<const std::vector<Tensor>> batches) {
    const auto us = static_cast<std::size_t>(s);
    const bool first = s == 0, last = s == stages_ - 1;
    const bool send_remote = !last || output_is_remote();
    const int next = last ? options_.output_rank : rank_ + 1;
    const int send_tag = last ? detail::kOutputTag : detail::kDataTag;
    const std::vector<ValueId>& in_ids = plan_.carried[us];
    const std::vector<ValueId>& out_ids = plan_.carried[us + 1];
    if (!first) {
      in_ = {detail::WireBuffer::make(types_of(s)), detail::WireBuffer::make(types_of(s))};
      RML_RETURN_IF_ERROR(post_receive(0));
      RML_RETURN_IF_ERROR(post_receive(1));
    }
    if (send_remote) out_ = {detail::WireBuffer::make(types_of(s + 1)), detail::WireBuffer::make(types_of(s + 1))};
    // Where each executor output goes: the first occurrence of a carried value into its place in
    // the message; anything else into scratch.
    std::vector<Tensor> scratch;
    std::vector<std::size_t> out_slot(stage_outputs_.size(), SIZE_MAX);
    for (std::size_t j = 0; j < stage_outputs_.size(); ++j) {
      const std::size_t at = index_of(out_ids, stage_outputs_[j]);
      bool taken = false;
      for (std::size_t i = 0; i < j; ++i) taken = taken || out_slot[i] == at;
      if (at < out_ids.size() && !taken) out_slot[j] = at;
    }
    for (std::size_t j = 0; j < stage_outputs_.size(); ++j)
      scratch.push_back(out_slot[j] == SIZE_MAX ? Tensor::zeros(executor_->output_type(j)) : Tensor());
    // Carried values this stage does not compute are forwarded from its input, or, for an output
    // listed twice, copied from its first place in the message.
    struct Copy {
      bool from_input;
      std::size_t from, to;
    };
    std::vector<Copy> copies;
    for (std::size_t i = 0; i < out_ids.size(); ++i) {
      if (std::find(out_slot.begin(), out_slot.end(), i) != out_slot.end()) continue;
      if (const std::size_t at = index_of(in_ids, out_ids[i]); at < in_ids.size()) {
        copies.push_back({true, at, i});
      } else if (const std::size_t first_at = index_of(out_ids, out_ids[i]); first_at < i) {
        copies.push_back({false, first_at, i});
      } else {
        return fail_local(internal_error("rank " + std::to_string(rank_) + ": nothing computes or carries value " +
                                         std::to_string(out_ids[i])));
      }
    }
    std::vector<std::size_t> input_at(stage_inputs_.size());
    for (std::size_t i = 0; i < stage_inputs_.size(); ++i) {
      input_at[i] = index_of(in_ids, stage_inputs_[i]);
      if (input_at[i] == in_ids.size())
        return fail_local(internal_error("rank " + std::to_string(rank_) + ": the stage reads value " +
                                         std::to_string(stage_inputs_[i]) + ", which no message carries"));
    }

    std::vector<Tensor> inputs(stage_inputs_.size()), outputs(stage_outputs_.size());
    const std::string where = "rank " + std::to_string(rank_) + " (stage " + std::to_string(s) + ")";
    for (std::uint64_t m = 0;; ++m) {
      const int slot = static_cast<int>(m % 2);
      RML_RETURN_IF_ERROR(poll_control());
      RML_RETURN_IF_ERROR(poll_output());
      // 1. This micro-batch's carried values (or the end of the stream, or an upstream error).
      const std::vector<Tensor>* carried_in = nullptr;
      bool end = false;
      if (first) {
        if (m >= batches.size()) {
          end = true;
        } else {
          if (Status bad = check_batch(batches[m]); !bad.ok())
            return fail_in_band(bad.with_prefix(where + ", micro-batch " + std::to_string(m) + ": "), m, slot,
                                send_remote, next, send_tag);
          carried_in = &batches[m];
        }
      } else {
        MPI_Status st;
        RML_RETURN_IF_ERROR(wait(in_request_[slot], &st, "micro-batch " + std::to_string(m) + " from", rank_ - 1));
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        stats_.bytes_received += static_cast<std::uint64_t>(count);
        const Header h = in_[static_cast<std::size_t>(slot)].header();
        if (h.magic != detail::kMagic)
          return fail_local(data_loss(where + ": a malformed message for micro-batch " + std::to_string(m)), m);
        if (h.kind == detail::MessageKind::error) {
          const detail::WireBuffer& b = in_[static_cast<std::size_t>(slot)];
          Status upstream = detail::status_of(h, reinterpret_cast<const char*>(b.data()) + detail::kHeaderBytes,
                                              b.bytes - detail::kHeaderBytes);
          forward_error(upstream, h, slot, send_remote, next, send_tag);
          return upstream;
        }
        if (h.kind == detail::MessageKind::end) {
          end = true;
        } else {
          carried_in = &in_[static_cast<std::size_t>(slot)].values;
        }
      }
      // 2. The send buffer of micro-batch m - 2 must be free.
      if (send_remote && out_request_[slot] != MPI_REQUEST_NULL)
        RML_RETURN_IF_ERROR(
            wait(out_request_[slot], nullptr, "micro-batch " + std::to_string(m - 2) + " to be taken by", next));
      if (end) return send_end(m, slot, send_remote, next, send_tag);
      // 3. Compute into the message (or, for the output rank, into fresh tensors).
      std::vector<Tensor> fresh;
      if (!send_remote)
        for (const TensorType& t : types_of(s + 1)) fresh.push_back(Tensor::zeros(t));
      const std::vector<Tensor>& dest = send_remote ? out_[static_cast<std::size_t>(slot)].values : fresh;
      for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i] = (*carried_in)[input_at[i]];
      for (std::size_t j = 0; j < outputs.size(); ++j)
        outputs[j] = out_slot[j] == SIZE_MAX ? scratch[j] : dest[out_slot[j]];
      Status ran;
      if (options_.fault) ran = options_.fault(s, m);
      const auto t0 = Clock::now();
      if (ran.ok()) ran = executor_->run_into(inputs, outputs);
      stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      if (!ran.ok())
        return fail_in_band(ran.with_prefix(where + ", micro-batch " + std::to_string(m) + ": "), m, slot, send_remote,
                            next, send_tag);
      for (const Copy& c : copies) {
        const Tensor& from = c.from_input ? (*carried_in)[c.from] : dest[c.from];
        if (from.nbytes()) std::memcpy(dest[c.to].mutable_raw_data(), from.raw_data(), from.nbytes());
      }
      // 4. The input slot is free again: post the receive of micro-batch m + 2.
      if (!first) RML_RETURN_IF_ERROR(post_receive(slot));
      // 5. Send on.
      ++stats_.micro_batches;
      if (!send_remote) {
        results_.push_back(std::move(fresh));
        continue;
      }
      detail::WireBuffer& b = out_[static_cast<std::size_t>(slot)];
      b.header() = Header{};
      b.header().micro_batch = m;
      b.header().payload_bytes = b.payload_bytes;
      if (int err =
              MPI_Isend(b.data(), static_cast<int>(b.bytes), MPI_BYTE, next, send_tag, comm_, &out_request_[slot]);
          err != MPI_SUCCESS)
        return fail_local(internal_error(where + ": MPI_Isend: " + detail::mpi_error_text(err)), m);
    }
  }

  Status send_end(std::uint64_t m, int slot, bool send_remote, int next, int tag) {
    if (!send_remote) return {};
    detail::WireBuffer& b = out_[static_cast<std::size_t>(slot)];
    b.header() = Header{};
    b.header().kind = detail::MessageKind::end;
    b.header().micro_batch = m;
    if (int err = MPI_Isend(b.data(), static_cast<int>(detail::kHeaderBytes), MPI_BYTE, next, tag, comm_,
                            &out_request_[slot]);
        err != MPI_SUCCESS)
      return internal_error("MPI_Isend: " + detail::mpi_error_text(err));
    // Both sends must complete before the buffers may change.
    for (MPI_Request& r : out_request_)
      if (r != MPI_REQUEST_NULL) RML_RETURN_IF_ERROR(wait(r, nullptr, "the end of the stream to be taken by", next));
    return {};
  }

  /// This stage failed at micro-batch m: an error message in place of its data, downstream; a
  /// control message to everyone else.
  Status fail_in_band(Status status, std::uint64_t m, int slot, bool send_remote, int next, int tag) {
    (void)slot;
    Header h;
    h.origin = rank_;
    h.micro_batch = m;
    forward_error(status, h, slot, send_remote, next, tag);
    for (int r = 0; r < size_; ++r) {  // the ranks before this one (and an output rank elsewhere)
      if (r == rank_ || r == next || !(r < rank_ || r == options_.output_rank)) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      if (MPI_Isend(in_band_.get(), sizeof(detail::ErrorMessage), MPI_BYTE, r, detail::kControlTag, comm_, &req) ==
          MPI_SUCCESS)
        leaked_.push_back(req);
    }
    return status;
  }

  /// Sends `status` downstream in band (tag of the data stream), never waiting.
  void forward_error(const Status& status, const Header& h, int slot, bool send_remote, int next, int tag) {
    (void)slot;
    in_band_ = std::make_unique<detail::ErrorMessage>(detail::make_error(status, h.origin, h.micro_batch));
    if (!send_remote) return;
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(in_band_.get(), sizeof(detail::ErrorMessage), MPI_BYTE, next, tag, comm_, &req) == MPI_SUCCESS)
      leaked_.push_back(req);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, stages_ = 1;
  bool ready_ = false;
  PipelineOptions options_;
  std::chrono::milliseconds deadline_span_{60000};
  StagePlan plan_;
  std::vector<std::vector<TensorType>> types_;  // per link: the carried values' types
  std::optional<Executor> executor_;
  std::vector<ValueId> stage_inputs_, stage_outputs_;
  std::vector<detail::WireBuffer> in_, out_, sink_;
  MPI_Request in_request_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Request out_request_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Request sink_request_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Request control_request_ = MPI_REQUEST_NULL;
  std::unique_ptr<detail::ErrorMessage> control_ = std::make_unique<detail::ErrorMessage>();
  std::unique_ptr<detail::ErrorMessage> told_, in_band_;
  std::vector<MPI_Request> leaked_;
  bool sink_open_ = false;
  std::uint64_t sink_next_ = 0;
  std::vector<std::vector<Tensor>> results_;
  PipelineStats stats_;
};

}  // namespace detail

/// One rank's part of a pipeline. Move-only; create and run are collective over the communicator.
class Pipeline {
 public:
  /// Collective: every rank of `comm` calls it with its own copy of the model (or the status of
  /// loading it, so that a rank that could not load is reported everywhere). MPI must be
  /// initialized (MPI_THREAD_FUNNELED or more when threads > 1).
  ///
  /// Errors, identical on every rank: the first failing rank's status (prefixed `rank r: `);
  /// INVALID_ARGUMENT naming the ranks whose graph differs from rank 0's, or whose options do;
  /// DATA_LOSS when a rank does not answer within the timeout.
  static Result<Pipeline> create(MPI_Comm comm, const Result<Graph>& graph, const PipelineOptions& options = {}) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
      return failed_precondition("Pipeline::create: MPI is not initialized (or already finalized)");
    Pipeline p;
    p.rank_ = std::make_unique<detail::PipelineRank>();
    RML_RETURN_IF_ERROR(p.rank_->create(comm, graph, options));
    return p;
  }

  /// Collective: streams `batches` (given on rank 0: batches[m] holds micro-batch m's inputs in
  /// the graph's input order; ignored elsewhere) through the pipeline. Returns on the output rank
  /// the graph's outputs of every micro-batch, in order; elsewhere an empty list.
  ///
  /// Errors, on every rank of the pipeline: the failing rank's status, prefixed `rank r (stage
  /// s), micro-batch m: `; DATA_LOSS when a rank waited longer than the timeout; FAILED_PRECONDITION
  /// after an earlier failure.
  Result<std::vector<std::vector<Tensor>>> run(std::span<const std::vector<Tensor>> batches) {
    if (!rank_) return failed_precondition("Pipeline::run: the pipeline was moved from");
    return rank_->run(batches);
  }

  [[nodiscard]] int rank() const noexcept { return rank_->rank(); }
  [[nodiscard]] int stages() const noexcept { return rank_->stages(); }
  /// The stage this rank runs, or -1 for a rank beyond the stages.
  [[nodiscard]] int stage() const noexcept { return rank_->stage(); }
  /// The plan every rank follows (the same everywhere).
  [[nodiscard]] const StagePlan& plan() const noexcept { return rank_->plan(); }
  /// What this rank did in the last run.
  [[nodiscard]] const PipelineStats& stats() const noexcept { return rank_->stats(); }
  /// Bytes of one message on the cut before stage s (0 < s < stages), or to the output rank (s = stages).
  [[nodiscard]] std::size_t message_bytes(int s) const { return rank_->message_bytes(s); }

 private:
  Pipeline() = default;
  std::unique_ptr<detail::PipelineRank> rank_;
};

/// MPI for the length of a scope: initializes it (MPI_THREAD_FUNNELED) unless someone already
/// did, and finalizes it at the end only if it initialized it.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    status_ = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS
                  ? Status()
                  : internal_error("MPI_Init_thread failed");
    owner_ = status_.ok();
    if (owner_) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    if (owner_ && !abandoned_) MPI_Finalize();
  }
  [[nodiscard]] const Status& status() const noexcept { return status_; }
  /// Call after a peer was lost (a Pipeline returned DATA_LOSS naming a rank): the destructor then
  /// skips `MPI_Finalize`, which is collective and would wait for the dead rank forever. Open MPI
  /// 4.1 has no ULFM, so a job that lost a rank cannot be shut down cleanly; the process just exits
  /// with its Status, and mpiexec ends the job once every survivor has.
  void abandon() noexcept { abandoned_ = true; }
  [[nodiscard]] static int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  [[nodiscard]] static int world_size() {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }

 private:
  Status status_;
  bool owner_ = false;
  bool abandoned_ = false;
};

/// What run_pipeline did on this rank.
struct PipelineReport {
  /// On the output rank: every micro-batch's outputs, in order (empty elsewhere).
  std::vector<std::vector<Tensor>> outputs;
  StagePlan plan;
  PipelineStats stats;
  int rank = 0, stage = -1, stages = 0;
  /// The graph's output names (for printing).
  std::vector<std::string> output_names;
};

/// The whole command in one collective call, for `mpirun -np K rml run --pipeline K MODEL`:
/// every rank loads `model` (a failure to load is reported on every rank), builds the pipeline
/// and streams `batches` (read on rank 0 only) through it.
inline Result<PipelineReport> run_pipeline(MPI_Comm comm, const std::filesystem::path& model,
                                           std::span<const std::vector<Tensor>> batches,
                                           const PipelineOptions& options = {}) {
  Result<Graph> graph = load_graph(model);
  PipelineReport report;
  if (graph.ok()) report.output_names = graph->output_names();
  RML_ASSIGN_OR_RETURN(Pipeline pipeline, Pipeline::create(comm, graph, options));
  RML_ASSIGN_OR_RETURN(report.outputs, pipeline.run(batches));
  report.plan = pipeline.plan();
  report.stats = pipeline.stats();
  report.rank = pipeline.rank();
  report.stage = pipeline.stage();
  report.stages = pipeline.stages();
  return report;
}

}  // namespace rml::dist
