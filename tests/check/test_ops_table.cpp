// The op tables: lookups both ways, attribute schemas, and docs/ops.md listing exactly the table.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "rml/ir/ops.hpp"

using namespace rml;

TEST_CASE("op names map both ways") {
  CHECK(op_count == 49);
  for (std::size_t i = 0; i < op_count; ++i) {
    const auto c = static_cast<OpCode>(i);
    REQUIRE(find_op(op_name(c)) == c);
    CHECK(is_known_op(op_name(c)));
    CHECK(op_info(c).code == c);
  }
  CHECK(op_name(OpCode::MatMul) == "matmul");
  CHECK(op_code_name(OpCode::MatMul) == "MatMul");
  CHECK(op_code_name(OpCode::Relu) == "Relu");
  CHECK(op_code_name(OpCode::Sum) == "Sum");
  CHECK(op_code_name(OpCode::MaxPool2d) == "MaxPool2d");
  CHECK(op_name(OpCode::AvgPool2d) == "avg_pool2d");
  CHECK(op_code_name(OpCode::ArgMax) == "ArgMax");
  CHECK_FALSE(is_known_op("Relu"));
  CHECK_FALSE(is_known_op(""));
  CHECK_FALSE(find_op("conv3d").has_value());
  CHECK(op_name(OpCode::count_) == "?");
}

TEST_CASE("the stored numbers of OpCode are append-only") {
  // These numbers are in files; a change here breaks them.
  CHECK(static_cast<int>(OpCode::Neg) == 0);
  CHECK(static_cast<int>(OpCode::Cos) == 14);
  CHECK(static_cast<int>(OpCode::Add) == 15);
  CHECK(static_cast<int>(OpCode::Greater) == 24);
  CHECK(static_cast<int>(OpCode::MatMul) == 25);
  CHECK(static_cast<int>(OpCode::Cast) == 43);
  CHECK(static_cast<int>(OpCode::Where) == 44);
  CHECK(static_cast<int>(OpCode::LogicalAnd) == 45);
  CHECK(static_cast<int>(OpCode::LogicalNot) == 47);
  CHECK(static_cast<int>(OpCode::Mod) == 48);
}

TEST_CASE("families and arity bounds") {
  for (const auto& r : unary_ops) CHECK((is_unary(r.code) && r.min_inputs == 1 && r.max_inputs == 1));
  for (const auto& r : binary_ops) CHECK((is_binary(r.code) && r.min_inputs == 2 && r.max_inputs == 2));
  CHECK(op_info(OpCode::Conv2d).min_inputs == 2);
  CHECK(op_info(OpCode::Conv2d).max_inputs == 3);
  CHECK(op_info(OpCode::Concat).max_inputs == kUnbounded);
  CHECK(op_info(OpCode::Where).min_inputs == 3);
  CHECK(op_info(OpCode::ArgMax).dtypes == DTypeRule::argmax);
  CHECK(op_info(OpCode::Gather).dtypes == DTypeRule::gather);
  const AttrSpec* groups = find_attr(OpCode::Conv2d, "groups");
  REQUIRE(groups != nullptr);
  CHECK(groups->kind == AttrKind::integer);
  CHECK(groups->fallback == "1");
  CHECK(find_attr(OpCode::MaxPool2d, "kernel")->required);
  CHECK(find_attr(OpCode::Relu, "alpha") == nullptr);
}

namespace {

/// docs/ops.md: `### \`name\` (CodeName)` headings, then `| \`attr\` | kind | default | ... |` rows.
std::map<std::string, std::pair<std::string, std::set<std::string>>> read_doc() {
  std::ifstream in(std::filesystem::path(RML_TEST_DATA_DIR) / ".." / ".." / "docs" / "ops.md");
  REQUIRE(in.good());
  std::map<std::string, std::pair<std::string, std::set<std::string>>> ops;
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind("### `", 0) == 0) {
      const auto end = line.find('`', 5);
      current = line.substr(5, end - 5);
      const auto open = line.find('(', end), close = line.find(')', end);
      CHECK_MESSAGE(ops.count(current) == 0, "listed twice: ", current);
      ops[current].first = line.substr(open + 1, close - open - 1);
    } else if (line.rfind("## ", 0) == 0) {
      current.clear();
    } else if (!current.empty() && line.rfind("| `", 0) == 0) {
      const auto end = line.find('`', 3);
      ops[current].second.insert(line.substr(3, end - 3));
    }
  }
  return ops;
}

}  // namespace

TEST_CASE("docs/ops.md lists exactly the table's ops and attributes") {
  const auto doc = read_doc();
  CHECK(doc.size() == op_count);
  for (std::size_t i = 0; i < op_count; ++i) {
    const OpInfo& info = op_info(static_cast<OpCode>(i));
    const std::string name(info.name);
    INFO("op ", name);
    const auto it = doc.find(name);
    REQUIRE(it != doc.end());
    CHECK(it->second.first == info.code_name);
    std::set<std::string> attrs;
    for (const AttrSpec& a : info.attrs) attrs.insert(std::string(a.name));
    CHECK(it->second.second == attrs);
  }
}
