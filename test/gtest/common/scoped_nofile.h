/*
 * Test helper: this process's soft RLIMIT_NOFILE set for the lifetime of an
 * object (peers started meanwhile inherit it), restored after.
 */
#ifndef TEST_COMMON_SCOPED_NOFILE_H
#define TEST_COMMON_SCOPED_NOFILE_H

#include <sys/resource.h>


namespace test {

class scoped_nofile {
public:
    /* the soft limit set to @a soft; with @a at_least, only raised to it
     * (kept when already higher) */
    explicit scoped_nofile(rlim_t soft, bool at_least = false)
    {
        struct rlimit lim;

        m_saved = (getrlimit(RLIMIT_NOFILE, &m_old) == 0);
        lim     = m_old;
        if (m_saved && !(at_least && (m_old.rlim_cur >= soft))) {
            lim.rlim_cur = soft;
            m_ok         = (setrlimit(RLIMIT_NOFILE, &lim) == 0);
        } else {
            m_ok = m_saved;
        }
    }
    ~scoped_nofile()
    {
        if (m_saved) {
            setrlimit(RLIMIT_NOFILE, &m_old);
        }
    }
    scoped_nofile(const scoped_nofile&) = delete;
    scoped_nofile &operator=(const scoped_nofile&) = delete;
    /* the limit was set (false: above the hard limit, or no getrlimit) */
    bool ok() const { return m_ok; }
private:
    struct rlimit m_old;
    bool          m_saved;
    bool          m_ok;
};

} // namespace test

#endif
