/* split_args.c: where a model command's layers go: -dev / --device cuda|vulkan[:N]|none, -sm /
 * --split-mode auto|none|layer|row, -ts / --tensor-split A,B,... and -mg / --main-gpu N among
 * its arguments (llama.cpp's spellings), and --dist-addr HOST:PORT, --dist-rank R, --dist-world
 * N (or torchrun's MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE) for a model split across
 * processes: taken out before the command parses the
 * rest, then set in the parameters its model loads with. A rank other than 0 runs no command:
 * it loads the model and follows rank 0 (cmd_split_follow). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static struct {
    int mode, main_gpu;
    float share[OX_MAX_DEVICES];
    const char *addr, *device;
    int rank, world;
    char env_addr[300];
} split = {.mode = OX_SPLIT_AUTO};

static int bad(const char *cmd, const char *what, const char *arg) {
    fprintf(stderr, "oxidize %s: %s '%s'\n", cmd, what, arg ? arg : "");
    return 2;
}

/* "3,1" or "3/1": the shares of GPUs 0, 1, ...; false for anything else. */
static bool parse_shares(const char *s, float *share) {
    memset(share, 0, OX_MAX_DEVICES * sizeof *share);
    for (int i = 0; *s; i++) {
        char *end;
        double v = strtod(s, &end);
        if (i == OX_MAX_DEVICES || end == s || !(v >= 0.0 && v <= 1e6) ||
            (*end && *end != ',' && *end != '/') || ((*end == ',' || *end == '/') && !end[1]))
            return false;
        share[i] = (float)v;
        s = *end ? end + 1 : end;
    }
    return true;
}

static int take(const char *cmd, const char *opt, const char *v) {
    double x;
    if (!strcmp(opt, "-sm") || !strcmp(opt, "--split-mode")) {
        static const char *const modes[] = {"none", "layer", "row"}; /* as numbered */
        for (int m = 0; m < 3; m++)
            if (!strcmp(v, modes[m]))
                return split.mode = m, -1;
        if (!strcmp(v, "auto"))
            return split.mode = OX_SPLIT_AUTO, -1;
        return bad(cmd, "--split-mode takes auto, none, layer or row, not", v);
    }
    if (!strcmp(opt, "--dist-addr"))
        return split.addr = v, -1;
    if (!strcmp(opt, "-dev") || !strcmp(opt, "--device"))
        return split.device = v, -1; /* checked where the model loads */
    if (!strcmp(opt, "--dist-rank") || !strcmp(opt, "--dist-world")) {
        if (!cmd_parse_number(v, 0, 65535, &x) || x != (int)x)
            return bad(cmd, "--dist-rank and --dist-world take a number, not", v);
        *(!strcmp(opt, "--dist-rank") ? &split.rank : &split.world) = (int)x;
        return -1;
    }
    if (!strcmp(opt, "-mg") || !strcmp(opt, "--main-gpu")) {
        if (!cmd_parse_number(v, 0, OX_MAX_DEVICES - 1, &x) || x != (int)x)
            return bad(cmd, "--main-gpu takes a GPU's number, not", v);
        return split.main_gpu = (int)x, -1;
    }
    return parse_shares(v, split.share)
               ? -1
               : bad(cmd, "--tensor-split takes shares such as 1,1 (one a GPU), not", v);
}

/* torchrun's variables where the options gave no group: rank 0's address from MASTER_ADDR and
 * MASTER_PORT, RANK, WORLD_SIZE. */
static int from_env(const char *cmd) {
    const char *world = getenv("WORLD_SIZE"), *rank = getenv("RANK");
    const char *host = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    double x;
    if (split.world || !world || !*world)
        return -1;
    if (!cmd_parse_number(world, 0, 65535, &x) || x != (int)x)
        return bad(cmd, "WORLD_SIZE is not a number:", world);
    split.world = (int)x;
    if (rank && *rank && (!cmd_parse_number(rank, 0, 65535, &x) || x != (int)x))
        return bad(cmd, "RANK is not a number:", rank);
    split.rank = rank && *rank ? (int)x : 0;
    if (!split.addr && host && *host) {
        bool v6 = strchr(host, ':') && *host != '[';
        snprintf(split.env_addr, sizeof split.env_addr, v6 ? "[%s]:%s" : "%s:%s", host,
                 port && *port ? port : "29500");
        split.addr = split.env_addr;
    }
    return -1;
}

static bool ours(const char *a) {
    static const char *const names[] = {
        "-sm",         "--split-mode", "-ts",          "--tensor-split", "-mg",     "--main-gpu",
        "--dist-addr", "--dist-rank",  "--dist-world", "-dev",           "--device"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(a, names[i]))
            return true;
    return false;
}

int cmd_split_args(const char *cmd, int *argc, char **argv) {
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!ours(a)) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc)
            return bad(cmd, "missing value after", a);
        int rc = take(cmd, a, argv[++i]);
        if (rc >= 0)
            return rc;
    }
    argv[out] = NULL;
    *argc = out;
    int rc = from_env(cmd);
    if (rc < 0 && split.world > 1 && (!split.addr || split.rank >= split.world)) {
        fprintf(stderr,
                "oxidize %s: a group of %d processes needs rank 0's --dist-addr HOST:PORT and "
                "a --dist-rank below %d (rank %d)\n",
                cmd, split.world, split.world, split.rank);
        return 2;
    }
    return rc;
}

void cmd_split_apply(struct ox_model_params *mp) {
    mp->split_mode = split.mode;
    mp->main_gpu = split.main_gpu;
    mp->device = split.device;
    memcpy(mp->tensor_split, split.share, sizeof split.share);
    if (split.world > 1)
        mp->dist_addr = split.addr, mp->dist_rank = split.rank, mp->dist_world = split.world;
}

int cmd_split_follow(const char *cmd, int argc, char **argv) {
    if (split.world < 2 || split.rank == 0)
        return -1;
    const char *path = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model"))
            path = argv[i + 1];
    if (!path)
        return bad(cmd, "ranks 1 and up load the model too: give it with -m, not", "");
    struct ox_model_params mp = ox_model_params_default();
    cmd_split_apply(&mp);
    struct ox_model *m = NULL;
    enum ox_status st = ox_model_load(path, &mp, &m);
    if (st == OX_OK) {
        fprintf(stderr, "oxidize %s: rank %d of %d: following rank 0 at %s\n", cmd, split.rank,
                split.world, split.addr);
        st = ox_model_follow(m);
    }
    if (st != OX_OK)
        fprintf(stderr, "oxidize %s: rank %d: %s\n", cmd, split.rank, ox_last_error());
    ox_model_free(m);
    return st == OX_OK ? 0 : 1;
}
