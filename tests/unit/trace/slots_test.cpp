// Batch slots: a job keeps its row from its first to its last step; a freed row is reused,
// lowest first. Each test spells out the rows per step above its expectations.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "tools/trace/slots.hpp"
#include "trace_lines.hpp"

namespace conveyor::trace {
namespace {

using namespace testing;

trace_file decode_trace(const std::vector<std::vector<std::string>>& steps) {
  std::istringstream in(header_line() + decode_steps(steps));
  return parse_trace(in, "t");
}

// The slot of job `id` in step i ( -1 when it is not in that step).
int32_t slot_of(const trace_file& t, const slot_layout& l, size_t i, const std::string& id) {
  for (size_t k = 0; k < t.steps[i].seqs.size(); ++k)
    if (t.jobs[t.steps[i].seqs[k].job] == id) return l.slot[i][k];
  return -1;
}

} // namespace

BOOST_AUTO_TEST_SUITE(slots)

BOOST_AUTO_TEST_CASE(static_batches_fill_rows_from_zero_again) {
  //  row 0: a a a d d
  //  row 1: b b b e e
  //  row 2: c c c
  const trace_file t = decode_trace({{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}, {"d", "e"}, {"d", "e"}});
  const slot_layout l = assign_slots(t.steps, t.jobs.size());
  BOOST_TEST(l.num_slots == 3);
  BOOST_TEST(slot_of(t, l, 0, "a") == 0);
  BOOST_TEST(slot_of(t, l, 2, "c") == 2);
  BOOST_TEST(slot_of(t, l, 3, "d") == 0);
  BOOST_TEST(slot_of(t, l, 4, "e") == 1);
}

BOOST_AUTO_TEST_CASE(continuous_refills_a_row_in_the_step_after_its_job_left) {
  //  row 0: a a c c
  //  row 1: b b b d
  const trace_file t = decode_trace({{"a", "b"}, {"a", "b"}, {"b", "c"}, {"c", "d"}});
  const slot_layout l = assign_slots(t.steps, t.jobs.size());
  BOOST_TEST(l.num_slots == 2);
  BOOST_TEST(slot_of(t, l, 2, "b") == 1);
  BOOST_TEST(slot_of(t, l, 2, "c") == 0);
  BOOST_TEST(slot_of(t, l, 3, "c") == 0);
  BOOST_TEST(slot_of(t, l, 3, "d") == 1);
}

BOOST_AUTO_TEST_CASE(the_lowest_free_row_is_taken_first) {
  //  row 0: a d d
  //  row 1: b . e
  //  row 2: c c c
  const trace_file t = decode_trace({{"a", "b", "c"}, {"c", "d"}, {"e", "c", "d"}});
  const slot_layout l = assign_slots(t.steps, t.jobs.size());
  BOOST_TEST(l.num_slots == 3);
  BOOST_TEST(slot_of(t, l, 1, "d") == 0);
  BOOST_TEST(slot_of(t, l, 2, "e") == 1);
  BOOST_TEST(slot_of(t, l, 2, "c") == 2);
}

BOOST_AUTO_TEST_CASE(a_job_keeps_its_row_through_steps_it_sits_out) {
  //  row 0: a . a    (a preempted, or out of token budget, in step 1)
  //  row 1: b b b
  //  row 2: . . c
  const trace_file t = decode_trace({{"a", "b"}, {"b"}, {"a", "b", "c"}});
  const slot_layout l = assign_slots(t.steps, t.jobs.size());
  BOOST_TEST(slot_of(t, l, 2, "a") == 0);
  BOOST_TEST(slot_of(t, l, 2, "c") == 2);
  BOOST_TEST(l.num_slots == 3);
}

BOOST_AUTO_TEST_CASE(a_window_assigns_from_its_own_first_step) {
  const trace_file t = decode_trace({{"a", "b"}, {"b"}, {"b", "c"}, {"c"}});
  const std::span<const step_record> win(t.steps.data() + 2, 2);
  const slot_layout l = assign_slots(win, t.jobs.size());
  BOOST_TEST(l.num_slots == 2);
  BOOST_TEST(l.slot[0][0] == 0);  // b
  BOOST_TEST(l.slot[0][1] == 1);  // c
  BOOST_TEST(l.slot[1][0] == 1);  // c keeps its row
}

BOOST_AUTO_TEST_CASE(no_steps_no_rows) {
  const slot_layout l = assign_slots({}, 0);
  BOOST_TEST(l.num_slots == 0);
  BOOST_TEST(l.slot.empty());
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::trace
