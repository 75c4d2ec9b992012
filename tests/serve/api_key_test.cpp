// RELIABILITY.md A1 and A3 at the function level: exact, case-sensitive keys; "Bearer" in any case; the
// X-Api-Key header; no key configured lets everything through.
#include <gtest/gtest.h>

#include "serve/api_key.h"

namespace day0 {
namespace {

TEST(ApiKey, constant_time_equal_compares_length_and_every_byte) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("secret", ""));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(ApiKey, bearer_or_x_api_key_must_match_exactly) {
  EXPECT_TRUE(api_key_accepted("Bearer sk-1", "", "sk-1"));
  EXPECT_TRUE(api_key_accepted("bearer sk-1", "", "sk-1"));
  EXPECT_TRUE(api_key_accepted("", "sk-1", "sk-1"));
  EXPECT_FALSE(api_key_accepted("", "", "sk-1"));
  EXPECT_FALSE(api_key_accepted("sk-1", "", "sk-1"));          // scheme missing
  EXPECT_FALSE(api_key_accepted("Bearer SK-1", "", "sk-1"));   // key in another case
  EXPECT_FALSE(api_key_accepted("Bearer sk-12", "", "sk-1"));  // suffix
  EXPECT_FALSE(api_key_accepted("Bearer sk-", "", "sk-1"));    // prefix
  EXPECT_FALSE(api_key_accepted("Basic sk-1", "", "sk-1"));
  EXPECT_TRUE(api_key_accepted("", "", ""));  // no key configured
}

}  // namespace
}  // namespace day0
