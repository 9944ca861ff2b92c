/*
 * Test helper: the bound of a wait that only guards against a hang (the test
 * expects its event long before; docs/testing.md, "Hang guards").
 * TEST_HANG_GUARD_MS, when set, lowers every such bound to its value: the
 * mutation check sets it, since a mutant that hangs a test is killed by
 * whichever bound ends the wait, and most of its time went into 60-second
 * guards. Short waits that expect nothing to happen stay as they are.
 */
#ifndef TEST_COMMON_HANG_GUARD_H
#define TEST_COMMON_HANG_GUARD_H

#include <algorithm>
#include <cstdlib>


namespace test {

/* @a ms, or TEST_HANG_GUARD_MS when that is lower */
inline int hang_guard_ms(int ms)
{
    static const int cap = [] {
        const char *value = getenv("TEST_HANG_GUARD_MS");
        int parsed        = (value != nullptr) ? atoi(value) : 0;
        return (parsed > 0) ? parsed : 0;
    }();

    return (cap > 0) ? std::min(ms, cap) : ms;
}

} // namespace test

#endif
