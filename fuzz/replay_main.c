/*
 * replay_main.c - runs a libFuzzer target over every file in a corpus directory, so each
 * fuzz target doubles as an ordinary test (CTest: fuzz_<name>_replay). Exit 0 when every input
 * ran; a crash or sanitizer report fails the test. An empty or missing corpus is a failure:
 * a replay that runs nothing proves nothing.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *dir = opendir(argv[1]);
    if (!dir) {
        fprintf(stderr, "cannot open corpus directory %s\n", argv[1]);
        return 1;
    }
    int count = 0;
    struct dirent *ent;
    while ((ent = readdir(dir)) != NULL) {
        if (ent->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], ent->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
            if (len == cap) {
                cap = cap ? cap * 2 : 4096;
                uint8_t *nb = realloc(buf, cap);
                if (!nb) break;
                buf = nb;
            }
            size_t got = fread(buf + len, 1, cap - len, f);
            if (got == 0) break;
            len += got;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf ? buf : (const uint8_t *)"", len);
        free(buf);
        count++;
    }
    closedir(dir);
    printf("replayed %d inputs from %s\n", count, argv[1]);
    return count > 0 ? 0 : 1;
}
