/*
 * cuda_ipc_ns: replay driver for fuzz_rkey_parse.c where libFuzzer is not
 * available. Feeds every file named on the command line (or found in a
 * directory argument), then random mutations of them, to
 * LLVMFuzzerTestOneInput. Each input lives in a heap buffer of exactly its
 * size so ASan catches any read past it.
 *
 * Environment: FUZZ_MUTATIONS (default 1000000), FUZZ_SECONDS (default 30,
 * stops the mutation loop early), FUZZ_SEED (default 1).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


#define REPLAY_MAX_LEN    512
#define REPLAY_MAX_INPUTS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


typedef struct {
    uint8_t *data;
    size_t   size;
} replay_input_t;

static replay_input_t replay_inputs[REPLAY_MAX_INPUTS];
static size_t         replay_num_inputs;
static uint64_t       replay_rng_state;


static uint64_t replay_rand(void)
{
    /* xorshift64*: reproducible across libcs */
    replay_rng_state ^= replay_rng_state >> 12;
    replay_rng_state ^= replay_rng_state << 25;
    replay_rng_state ^= replay_rng_state >> 27;
    return replay_rng_state * 0x2545f4914f6cdd1dull;
}

static void replay_run(const uint8_t *data, size_t size)
{
    /* exact-size copy: one byte past the input is a redzone */
    uint8_t *copy = malloc(size ? size : 1);

    if (copy == NULL) {
        abort();
    }
    memcpy(copy, data, size);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
}

static void replay_add_file(const char *path)
{
    uint8_t buf[REPLAY_MAX_LEN];
    size_t size;
    FILE *f;

    if (replay_num_inputs >= REPLAY_MAX_INPUTS) {
        return;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    size = fread(buf, 1, sizeof(buf), f);
    fclose(f);

    replay_run(buf, size);
    replay_inputs[replay_num_inputs].data = malloc(size ? size : 1);
    memcpy(replay_inputs[replay_num_inputs].data, buf, size);
    replay_inputs[replay_num_inputs].size = size;
    ++replay_num_inputs;
}

static void replay_add_path(const char *path)
{
    char child[4096];
    struct dirent *de;
    struct stat st;
    DIR *dir;

    if (stat(path, &st) != 0) {
        perror(path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        replay_add_file(path);
        return;
    }
    dir = opendir(path);
    if (dir == NULL) {
        perror(path);
        exit(2);
    }
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
        if ((stat(child, &st) == 0) && S_ISREG(st.st_mode)) {
            replay_add_file(child);
        }
    }
    closedir(dir);
}

/* Mutations aimed at the format: bit flips, byte sets at the length,
 * version, type and pid-flag offsets, truncation and extension */
static size_t replay_mutate(uint8_t *buf, size_t size)
{
    static const size_t offs[]  = {0, 68, 101, 102, 135};
    static const uint8_t vals[] = {0, 1, 2, 17, 18, 19, 34, 35, 36, 56,
                                   108, 109, 143, 144, 0x7f, 0x80, 0xff};
    unsigned n = 1 + replay_rand() % 4;
    unsigned i;
    size_t off;

    for (i = 0; i < n; ++i) {
        switch (replay_rand() % 6) {
        case 0:
        case 1:
            if (size) {
                buf[replay_rand() % size] ^= 1u << (replay_rand() % 8);
            }
            break;
        case 2:
            if (size) {
                buf[replay_rand() % size] = replay_rand();
            }
            break;
        case 3:
            off = offs[replay_rand() % (sizeof(offs) / sizeof(offs[0]))];
            if (off < size) {
                buf[off] = vals[replay_rand() % sizeof(vals)];
            }
            break;
        case 4:
            size = replay_rand() % 256;
            break;
        case 5:
            /* grow with zeros or random bytes, up to 255 */
            off = size;
            if (size < 255) {
                size += replay_rand() % (256 - size);
            }
            for (; off < size; ++off) {
                buf[off] = (replay_rand() % 2) ? 0 : replay_rand();
            }
            break;
        }
    }
    return size;
}

int main(int argc, char **argv)
{
    unsigned long long mutations = 1000000, seed = 1, done = 0;
    const char *env;
    uint8_t buf[REPLAY_MAX_LEN];
    double seconds = 30;
    time_t start;
    size_t size;
    int i;

    if ((env = getenv("FUZZ_MUTATIONS")) != NULL) {
        mutations = strtoull(env, NULL, 0);
    }
    if ((env = getenv("FUZZ_SECONDS")) != NULL) {
        seconds = strtod(env, NULL);
    }
    if ((env = getenv("FUZZ_SEED")) != NULL) {
        seed = strtoull(env, NULL, 0);
    }
    replay_rng_state = seed | 1; /* xorshift state must not be 0 */

    for (i = 1; i < argc; ++i) {
        replay_add_path(argv[i]);
    }
    printf("replayed %zu corpus inputs\n", replay_num_inputs);
    if (replay_num_inputs == 0) {
        return 0;
    }

    start = time(NULL);
    for (done = 0; done < mutations; ++done) {
        const replay_input_t *in;

        if (((done % 4096) == 0) && (difftime(time(NULL), start) >= seconds)) {
            break;
        }
        in   = &replay_inputs[replay_rand() % replay_num_inputs];
        memset(buf, 0, sizeof(buf));
        memcpy(buf, in->data, in->size);
        size = replay_mutate(buf, in->size);
        replay_run(buf, size);
    }
    printf("ran %llu mutated inputs (seed %llu)\n", done, seed);

    for (i = 0; i < (int)replay_num_inputs; ++i) {
        free(replay_inputs[i].data);
    }
    return 0;
}
