/*
 * Test helper: a private directory under /tmp (mode 0700) for the lifetime
 * of an object, removed with what is left in it: the socket of a peer
 * killed by its test stays behind (a broker removes such sockets when it
 * starts in that directory, and no broker starts in this one again).
 */
#ifndef TEST_COMMON_SCRATCH_DIR_H
#define TEST_COMMON_SCRATCH_DIR_H

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <cstring>
#include <string>


namespace test {

class scratch_dir {
public:
    /* empty path() when mkdtemp fails */
    explicit scratch_dir(const char *name)
    {
        std::string tmpl = std::string("/tmp/") + name + ".XXXXXX";
        if (mkdtemp(&tmpl[0]) != nullptr) {
            m_path = tmpl;
        }
    }

    ~scratch_dir()
    {
        if (m_path.empty()) {
            return;
        }
        DIR *dir = opendir(m_path.c_str());
        if (dir != nullptr) {
            struct dirent *entry;
            while ((entry = readdir(dir)) != nullptr) {
                if (strcmp(entry->d_name, ".") && strcmp(entry->d_name, "..")) {
                    unlinkat(dirfd(dir), entry->d_name, 0);
                }
            }
            closedir(dir);
        }
        rmdir(m_path.c_str());
    }

    scratch_dir(const scratch_dir&) = delete;
    scratch_dir &operator=(const scratch_dir&) = delete;

    const std::string &path() const
    {
        return m_path;
    }

private:
    std::string m_path;
};

} // namespace test

#endif
