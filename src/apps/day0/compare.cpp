// day0 compare: per-tap error against reference dumps and the first tap that leaves tolerance.
#include <algorithm>
#include <cstdio>

#include "apps/day0/commands.h"
#include "apps/day0/model_loading.h"
#include "model/reference_compare.h"

namespace day0::app {

// Enough for any reference dump (prompt + continuation); bounds the KV cache reserved.
constexpr std::int64_t kCompareMaxTokens = 4096;

int compare(const CompareOptions& o) {
  bool all_ok = true;
  for (const auto& ref : o.references) {
    auto model = load_for_command(o.dir, o.engine, kCompareMaxTokens);
    if (!model.ok()) return fail(model.error().message);
    auto cmp = compare_with_reference(*model->executor, ref, o.tolerance);
    if (!cmp.ok()) return fail(cmp.error().message);
    std::printf("reference %s (tolerance %.1e relative)\n", ref.c_str(), o.tolerance);
    std::printf("  %-28s %12s %12s  %s\n", "tap", "max abs", "relative", "");
    for (const auto& t : cmp->taps) {
      if (t.integer)
        std::printf("  %-28s %25s  %s\n", t.name.c_str(),
                    (std::to_string(t.mismatches) + " mismatches").c_str(), t.within ? "ok" : "FAIL");
      else
        std::printf("  %-28s %12.3e %12.3e  %s\n", t.name.c_str(), t.max_abs, t.rel, t.within ? "ok" : "FAIL");
    }
    for (const auto& m : cmp->missing) std::printf("  %-28s not produced by day0\n", m.c_str());
    if (cmp->greedy_steps > 0)
      std::printf("  greedy %d tokens: %s; worst step-logits relative error %.3e\n", cmp->greedy_steps,
                  cmp->greedy_first_mismatch < 0 ? "identical"
                                                 : ("first mismatch at step " +
                                                    std::to_string(cmp->greedy_first_mismatch)).c_str(),
                  cmp->greedy_logits_rel);
    if (cmp->greedy_first_mismatch >= 0 && cmp->greedy_mismatch_logit_scale > 0)
      std::printf("  at the mismatch the reference's own logit gap was %.3e (%.2e of its largest |logit| %.3f)\n",
                  cmp->greedy_mismatch_ref_gap, cmp->greedy_mismatch_ref_gap / cmp->greedy_mismatch_logit_scale,
                  cmp->greedy_mismatch_logit_scale);
    const std::string first = cmp->first_failing_tap();
    std::printf("  result: %s\n", cmp->ok() ? "PASS" : first.empty() ? "FAIL" : ("FAIL, first tap out of tolerance: " + first).c_str());
    all_ok &= cmp->ok();
  }
  return all_ok ? 0 : 1;
}

}  // namespace day0::app
