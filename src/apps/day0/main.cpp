// day0: bring a newly published MoE checkpoint to a validated endpoint. Subcommands: inspect, run, compare.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <exception>

#include "apps/day0/commands.h"

// CLI::PositiveNumber's message spells out DBL_MAX (300+ digits); this one says what is wanted.
static const CLI::Validator kPositive(
    [](std::string& s) {
      double v = 0;
      const bool ok = CLI::detail::lexical_cast(s, v) && v > 0 && std::isfinite(v);
      return ok ? std::string() : "must be a positive number, got " + s;
    },
    "POSITIVE");

int main(int argc, char** argv) {
  CLI::App app{"day0 - inference engine and toolkit for newly released MoE models"};
  app.require_subcommand(1);

  day0::app::InspectOptions inspect;
  auto* i = app.add_subcommand("inspect", "Architecture summary, parameters, bytes, op coverage, weight check");
  i->add_option("dir", inspect.dir, "Model directory (config.json, optional safetensors)")->required();
  i->add_option("--backend", inspect.backend, "Backend whose op coverage to show (cpu, cuda)");

  day0::app::RunOptions run;
  auto* r = app.add_subcommand("run", "Greedy generation from token ids");
  r->add_option("dir", run.dir, "Model directory")->required();
  r->add_option("--prompt-ids", run.prompt_ids, "Prompt token ids, e.g. 1,2,3")->required();
  r->add_option("--max-tokens", run.max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  r->add_option("--backend", run.backend, "Backend (cpu)");

  day0::app::CompareOptions compare;
  auto* c = app.add_subcommand("compare", "Per-tap comparison against reference dumps");
  c->add_option("dir", compare.dir, "Model directory")->required();
  c->add_option("--reference", compare.references, "Reference dump (.safetensors), repeatable")->required();
  c->add_option("--tolerance", compare.tolerance, "Relative error allowed per tap")->check(kPositive);
  c->add_option("--backend", compare.backend, "Backend (cpu)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 with CLI11's own output; usage errors are one "error: ..." line.
    if (e.get_exit_code() == 0) return app.exit(e);
    day0::app::fail(e.what());
    return e.get_exit_code();
  }
  try {
    if (*i) return day0::app::inspect(inspect);
    if (*r) return day0::app::run(run);
    if (*c) return day0::app::compare(compare);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: still one line, not an abort
    return day0::app::fail(e.what());
  }
  return 1;
}
