/* cmd.h: the subcommands of the oxidize binary, one cmd_<name>.c file each. */
#ifndef OX_APP_CMD_H
#define OX_APP_CMD_H

#include <stdbool.h>
#include <stddef.h>

#include "oxidize.h"

/* Every subcommand has this shape: argv[0] is the subcommand's own name ("info") and the rest
 * are its arguments, so each command parses its arguments as if it were a program of its own.
 * The return value is the process exit status: 0 ok, 1 failure, 2 bad usage. */
int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat_template(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_export_lora(int argc, char **argv);

/* -hf REPO[:QUANT] (and --hf-token TOKEN) among a model command's arguments: the model fetched
 * into the cache (or found there) and the arguments rewritten to -m PATH. Returns -1 to go on
 * (argc/argv possibly replaced), else an exit status. */
int cmd_hub_args(const char *cmd, int *argc, char ***argv);

/* --lora FILE / --lora-scaled FILE SCALE (lora_args.c): taken out of a model command's
 * arguments (at most CMD_LORA_MAX; -1 to go on, else an exit status after a message); loaded
 * for the command's model once it has it, and set on each context it makes (a failure is the
 * command's to print: ox_last_error() names the file). cmd_lora_named: the file and scale of
 * adapter i as given (for serve, which loads its model itself). */
#define CMD_LORA_MAX 8
int cmd_lora_args(const char *cmd, int *argc, char **argv);
int cmd_lora_count(void);
enum ox_status cmd_lora_load(struct ox_model *m);
enum ox_status cmd_lora_apply(struct ox_context *ctx);
void cmd_lora_named(int i, const char **path, float *scale);
/* The adapters cmd_lora_load loaded and their scales (up to CMD_LORA_MAX); how many. */
int cmd_lora_loaded(struct ox_lora **loras, float *scales);

/* -dev / --device, -sm / --split-mode, -ts / --tensor-split, -mg / --main-gpu (split_args.c):
 * taken out of a
 * model command's arguments (-1 to go on, else an exit status after a message), then set in the
 * parameters its model loads with. */
int cmd_split_args(const char *cmd, int *argc, char **argv);
void cmd_split_apply(struct ox_model_params *mp);
/* A rank other than 0 of a group of processes (--dist-rank): loads the command's model (-m) and
 * follows rank 0 until it ends; the exit status. -1 for any other process: run the command. */
int cmd_split_follow(const char *cmd, int argc, char **argv);
#define CMD_SPLIT_USAGE                                                                            \
    "  -dev, --device D      the GPU backend: cuda, vulkan (a discrete GPU first), vulkan:N\n"      \
    "                        (the N-th Vulkan device) or none (the CPU alone); default:\n"          \
    "                        OX_DEVICE's, else CUDA in a build that has it\n"                      \
    "  -sm, --split-mode M   auto (default: row where the model splits so, else layer; one\n"      \
    "                        GPU where there is one), none (one GPU), layer (each GPU runs\n"      \
    "                        consecutive layers) or row (every layer's heads and FFN rows\n"       \
    "                        split over the GPUs)\n"                                               \
    "  -ts, --tensor-split A,B  the GPUs' shares of the layers, or of the heads and FFN rows\n"    \
    "                        (row); 0 leaves one out\n"                                            \
    "  -mg, --main-gpu N     rank 0's GPU, where the logits come from (default 0)\n"               \
    "  --dist-addr HOST:PORT, --dist-rank R, --dist-world N  split by rows across N\n"             \
    "                        processes (one GPU each, -mg): rank 0 listens at HOST:PORT and\n"     \
    "                        runs the command, the others follow it (default: torchrun's\n"        \
    "                        MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)\n"

/* The whole file as a NUL-terminated string (length in *len), or NULL after printing
 * "oxidize CMD: ..." with the reason. */
char *cmd_read_file(const char *cmd, const char *path, size_t *len);

/* s as a number in [lo, hi] (the whole string: no trailing text); false otherwise. */
bool cmd_parse_number(const char *s, double lo, double hi, double *out);

/* Seconds on a monotonic clock. */
double cmd_now_s(void);

/* A context of n_ctx tokens (at most the model's training context) and batches of up to 512. */
enum ox_status cmd_context_create(struct ox_model *m, int n_ctx, int n_threads,
                                  struct ox_context **out);

/* Return a failing status to the caller (the library's message stays in ox_last_error()). */
#define CMD_TRY(expr)                                                                              \
    do {                                                                                           \
        enum ox_status cmd_try_status_ = (expr);                                                   \
        if (cmd_try_status_ != OX_OK)                                                              \
            return cmd_try_status_;                                                                \
    } while (0)

#endif
