/*
 * Test helpers: UCT components by name (see component.h).
 */
#include "component.h"

#include <cstring>


namespace test {

uct_component_h find_component(const char *name)
{
    uct_component_h *components, found = nullptr;
    uct_component_attr_t attr;
    unsigned count;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return nullptr;
    }
    for (unsigned i = 0; i < count; ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, name)) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

} // namespace test
