/*
 * Test helpers: UCT components by name.
 */
#ifndef TEST_COMMON_COMPONENT_H
#define TEST_COMMON_COMPONENT_H

extern "C" {
#include <uct/api/uct.h>
}


namespace test {

/* The registered UCT component called @a name, or nullptr */
uct_component_h find_component(const char *name);

} // namespace test

#endif
