// Pure. The engine's tier-1 check: a broken invariant is our bug, so it prints file:line and
// the message, then aborts. Expected "no" answers (allocation does not fit, queue full) are
// return values, never checks.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CONVEYOR_ASSERT(cond, msg)                                                              \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "%s:%d: CONVEYOR_ASSERT(%s) failed: %s\n", __FILE__, __LINE__, #cond, \
                   msg);                                                                        \
      std::abort();                                                                             \
    }                                                                                           \
  } while (false)
