// Logit edits (logit_edits.h): a row's edits grouped by id in their order, each kind's float arithmetic, the checks
// that name what is wrong, and CpuOps::edit_logits (the CUDA kernel's reference) on the rows it names alone.
#include "ops/logit_edits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.h"

namespace day0 {
namespace {

TEST(LogitEdits, a_rows_edits_are_grouped_by_id_keeping_each_ids_order) {
  LogitEdits e;
  e.add_row(3, {{7, LogitEditKind::add, 1.f},
                {2, LogitEditKind::repetition, 2.f},
                {7, LogitEditKind::subtract, 0.5f},
                {2, LogitEditKind::add, 4.f}});
  e.add_row(0, {});
  ASSERT_EQ(e.rows, (std::vector<std::int32_t>{3, 0}));
  ASSERT_EQ(e.begins, (std::vector<std::int32_t>{0, 4, 4}));
  const std::vector<std::pair<std::int32_t, LogitEditKind>> want = {
      {2, LogitEditKind::repetition}, {2, LogitEditKind::add}, {7, LogitEditKind::add}, {7, LogitEditKind::subtract}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(e.entries[i].id, want[i].first) << i;
    EXPECT_EQ(e.entries[i].kind, want[i].second) << i;
  }
  EXPECT_TRUE(check_logit_edits(e, 4, 8, "t").ok());
}

TEST(LogitEdits, each_kind_is_one_float_operation_and_a_repetition_divides_positive_logits_only) {
  EXPECT_EQ(apply_logit_edit(1.5f, LogitEditKind::add, 0.25f), 1.75f);
  EXPECT_EQ(apply_logit_edit(3.f, LogitEditKind::repetition, 1.5f), 2.f);
  EXPECT_EQ(apply_logit_edit(-3.f, LogitEditKind::repetition, 1.5f), -4.5f);
  EXPECT_TRUE(std::signbit(apply_logit_edit(-0.f, LogitEditKind::repetition, 1.5f)));  // not > 0: multiplied
  EXPECT_EQ(apply_logit_edit(1.f, LogitEditKind::subtract, 0.1f), 1.f - 0.1f);
  EXPECT_EQ(apply_logit_edit(-INFINITY, LogitEditKind::add, 100.f), -INFINITY);
  EXPECT_EQ(apply_logit_edit(-INFINITY, LogitEditKind::repetition, 1.2f), -INFINITY);
}

TEST(LogitEdits, checks_name_a_bad_row_id_order_or_bound) {
  const auto error = [](const LogitEdits& e) {
    const Status s = check_logit_edits(e, 4, 10, "edit_logits");
    return s.ok() ? std::string() : s.error().message;
  };
  LogitEdits ok;
  ok.add_row(1, {{9, LogitEditKind::add, 1.f}});
  EXPECT_EQ(error(ok), "");
  LogitEdits row = ok;
  row.rows[0] = 4;
  EXPECT_NE(error(row).find("edited row 4 is outside the step's 4 rows"), std::string::npos) << error(row);
  LogitEdits twice = ok;
  twice.add_row(1, {});
  EXPECT_NE(error(twice).find("edited twice"), std::string::npos) << error(twice);
  LogitEdits id = ok;
  id.entries[0].id = 10;
  EXPECT_NE(error(id).find("edited token id 10 is outside the 10 logits"), std::string::npos) << error(id);
  LogitEdits order;
  order.rows = {0};
  order.begins = {0, 2};
  order.entries = {{5, LogitEditKind::add, 1.f}, {4, LogitEditKind::add, 1.f}};
  EXPECT_NE(error(order).find("ids must ascend"), std::string::npos) << error(order);
  LogitEdits bounds = ok;
  bounds.begins = {0, 2};
  EXPECT_NE(error(bounds).find("bounds"), std::string::npos) << error(bounds);
  LogitEdits kind = ok;
  kind.entries[0].kind = static_cast<LogitEditKind>(7);
  EXPECT_NE(error(kind).find("unknown logit edit kind 7"), std::string::npos) << error(kind);
}

TEST(CpuOps, edit_logits_changes_the_edited_ids_of_the_named_rows_alone) {
  CpuOps cpu;
  Tensor x = Tensor::zeros({3, 5}, DType::f32);
  for (std::int64_t i = 0; i < 15; ++i) x.data<float>()[i] = static_cast<float>(i) - 6.f;
  const std::vector<float> before(x.data<float>(), x.data<float>() + 15);
  LogitEdits e;
  e.add_row(2,
            {{4, LogitEditKind::add, 1.f}, {1, LogitEditKind::repetition, 2.f}, {4, LogitEditKind::repetition, 4.f}});
  ASSERT_TRUE(cpu.edit_logits(x, e, nullptr).ok());
  for (std::int64_t i = 0; i < 15; ++i) {
    const float want = i == 14 ? (before[14] + 1.f) / 4.f : i == 11 ? before[11] / 2.f : before[i];
    EXPECT_EQ(x.data<float>()[i], want) << i;
  }
  LogitEdits bad;
  bad.add_row(0, {{5, LogitEditKind::add, 1.f}});
  EXPECT_FALSE(cpu.edit_logits(x, bad, nullptr).ok());
}

}  // namespace
}  // namespace day0
