/*
 * Test helper: an environment variable set for the lifetime of an object
 * (for the peers a test starts, and for what a driver reads at its cuInit),
 * restored after.
 */
#ifndef TEST_COMMON_SCOPED_ENV_H
#define TEST_COMMON_SCOPED_ENV_H

#include <cstdlib>
#include <string>


namespace test {

class scoped_env {
public:
    scoped_env(const char *name, const std::string &value) : m_name(name)
    {
        const char *old = getenv(name);
        m_had = (old != nullptr);
        if (m_had) {
            m_old = old;
        }
        setenv(name, value.c_str(), 1);
    }
    ~scoped_env()
    {
        if (m_had) {
            setenv(m_name, m_old.c_str(), 1);
        } else {
            unsetenv(m_name);
        }
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env &operator=(const scoped_env&) = delete;
private:
    const char  *m_name;
    bool        m_had = false;
    std::string m_old;
};

} // namespace test

#endif
