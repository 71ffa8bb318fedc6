/* split.h: a model split over ranks by attention heads and FFN rows (--split-mode row): its
 * shards (shard.c), each held by a thread of its rank (rank 0's the caller's), the group that
 * sums their outputs, and the contexts over them. The caller's context is rank 0's; every call
 * that changes it runs on every rank (split_ops.c), so the ranks decode the same batches. Ranks
 * in other processes (one a GPU, on this host or others) get those calls as messages through
 * the group's connections (backend/dist), and follow them (split_follow). */
#ifndef OX_MODEL_SPLIT_H
#define OX_MODEL_SPLIT_H

#include <pthread.h>

#include "backend/dist/dist.h"
#include "model/context.h"

enum { SPLIT_MAX = OX_MAX_DEVICES, SPLIT_CONTEXTS = 256 /* contexts of one model at once */ };

/* Room the wire's bytes and a read call's arrays take, kept from call to call (a decode step
 * allocates nothing once it has grown), and freed by split_wire_free. */
struct split_wire_room {
    uint8_t *bytes;
    int32_t *ints;
    bool *flags;
    size_t bytes_cap, ints_cap, flags_cap;
};

struct split_workers; /* the threads of this process's ranks but its first (split.c) */
struct split_watch;   /* the thread that watches the other processes while a call runs */

struct model_split {
    int world;                          /* ranks in all */
    int mode;                           /* OX_SPLIT_ROW (heads and FFN rows) or OX_SPLIT_LAYER */
    int32_t layer_begin[SPLIT_MAX + 1]; /* by layers: rank r runs layer_begin[r] .. [r + 1] - 1 */
    int32_t cpu_layers;                 /* of rank 0's, those it runs on the CPU (the first) */
    float share[SPLIT_MAX];             /* rank r's share (of the layers, or heads and rows) */
    int first, n_local;                 /* this process's: first .. first + n_local - 1 */
    const struct backend_ops *ops;      /* the backend whose group sums the ranks */
    struct backend_group *group;
    bool group_borrowed;               /* a test's group shared by its "processes" (threads) */
    struct ox_model *shard[SPLIT_MAX]; /* by local rank (rank first + i) */
    int device[SPLIT_MAX];             /* local rank i's GPU (unused on the CPU) */
    struct split_workers *workers;
    struct dist_group *dist; /* the other processes' ranks, or NULL: all are here */
    bool broken; /* a rank was lost or failed inside a call: the group is over (split_break) */
    struct split_wire_room wire; /* rank 0: its calls' bytes, and the answers' (under calls) */
    uint8_t *answers;
    size_t answers_cap;
    struct split_watch *watch;
    uint64_t used[SPLIT_CONTEXTS / 64]; /* the contexts' numbers in use (rank 0) */
    /* one call at a time over all ranks (split_call_run): two threads' calls on two contexts
     * would otherwise reach the other processes in one order and this one's ranks in another */
    pthread_mutex_t calls;
};

/* A context of a split model, as its rank 0 context holds it (ctx->split). */
struct split_context {
    struct model_split *sp;
    const struct ox_model *model;       /* the whole model the context was made of */
    uint32_t id;                        /* its number: other processes' ranks know it by it */
    struct ox_context *rank[SPLIT_MAX]; /* by local rank; rank[0] the context the caller holds */
};

/* How a model is split: by rows or layers (mode), over world ranks, rank r on GPU device[r]
 * with share[r] of the layers, or of the heads and FFN rows (0: an equal share). */
struct split_plan {
    int mode, world;
    int device[SPLIT_MAX];
    float share[SPLIT_MAX];
    int32_t cpu_layers; /* by layers: the first ones, which rank 0 runs on the CPU (-ngl) */
};

/* The split params ask for: its GPUs (main_gpu rank 0's) and their shares; world 0 where the
 * model is not to be split (no split mode, one GPU, or the CPU); an error for shares the split
 * cannot honour. */
enum ox_status split_devices(const struct ox_model_params *p, const struct backend_ops *gpu,
                             int n_layer, struct split_plan *plan);
/* The mode params' split_mode asks for, OX_SPLIT_AUTO made one for m (loaded for the CPU) on
 * `gpus` GPUs. */
int split_auto_mode(const struct ox_model *m, const struct ox_model_params *p, int gpus);
/* Whether OX_SPLIT_AUTO splits m over world ranks (shares as model_shard's) by rows: a dense
 * model that splits so (experts and latent attention split by rows only when asked). */
bool split_rows_by_default(const struct ox_model *m, int world, const float *share);

/* Split m (loaded for the CPU, unpacked) as plan says over ranks of ops's group, all in this
 * process (ops the CPU's: threads of the host; its devices unused): m->split, freed by
 * model_split_free. */
enum ox_status model_split(struct ox_model *m, const struct backend_ops *ops,
                           const struct split_plan *plan);
/* Split m by mode (rows or layers, equal shares) over the processes that join dp (this one
 * rank dp->rank, on GPU device), their sums and hand-overs through a group ops's backend joins
 * with the bytes rank 0 hands out (NCCL's unique id); or, with group (a test's ranks as
 * threads), through that group. */
enum ox_status model_split_join(struct ox_model *m, const struct backend_ops *ops,
                                struct backend_group *group, const struct dist_params *dp,
                                int device, int mode);
void model_split_free(struct ox_model *m);

/* Ends the group for good, from any thread: every rank's sums and hand-overs fail rather than
 * wait (ops->group_abort), the connections to the other processes close (so their ranks stop
 * waiting too), and later calls fail at once. For a rank lost, or one that failed inside a call
 * where the others may already wait for it. */
void split_break(struct model_split *sp);

/* While a call runs on this process's ranks (between begin and end), a rank of another process
 * that goes (its connection closes) ends the group (ops->group_abort): sums waiting for it fail
 * instead of waiting forever. No-ops where all ranks are here. */
void split_watch_begin(struct model_split *sp);
void split_watch_end(struct model_split *sp);

/* fn(rank, user) on every rank of this process at once, each on its rank's thread (the first
 * on the caller's, its device made current), returning when all have: the first failure's
 * status, its message naming the rank. */
typedef enum ox_status (*split_fn)(int rank, void *user);
enum ox_status split_run(struct model_split *sp, split_fn fn, void *user);

/* ---- calls on the contexts (split_ops.c), and their bytes (split_wire.c) ------------------ */

enum split_call_kind {
    SPLIT_CREATE,
    SPLIT_FREE,
    SPLIT_DECODE,
    SPLIT_EMBED,
    SPLIT_KV,
    SPLIT_STATE_SIZE,
    SPLIT_SAVE,
    SPLIT_LOAD,
    SPLIT_LORA /* a[0..1] the adapter's id (0: cleared), a[2] the scale's bits, and the first
                  time it goes to another process the adapter's GGUF bytes (split_lora.c) */
};
enum split_kv_op { SPLIT_KV_CLEAR, SPLIT_SEQ_RM, SPLIT_SEQ_CP, SPLIT_SEQ_ADD, SPLIT_ONE_TOKEN };

/* One call as every rank makes it on its context of number ctx. Rank r's results: size[r]
 * (STATE_SIZE), its part of a state at buf + at[r] (SAVE, LOAD: size[r] bytes), out[r] (EMBED:
 * rank 0's the caller's). */
struct split_call {
    enum split_call_kind kind;
    uint32_t ctx;
    enum split_kv_op kv;
    int32_t a[4];                    /* kv's arguments; a[0] the state calls' sequence */
    struct ox_context_params params; /* CREATE */
    struct ox_batch batch;           /* DECODE (its arrays the caller's) */
    const ox_token *tokens;          /* EMBED */
    int32_t n;
    enum ox_pooling pooling;
    bool normalize;
    uint8_t *buf;
    size_t size[SPLIT_MAX], at[SPLIT_MAX];
    float *out[SPLIT_MAX];
    const struct ox_lora *lora; /* LORA: the whole's adapter (NULL: all cleared), its scale */
    float lora_scale;
};

/* ---- LoRA adapters on a split model's contexts (split_lora.c) ---------------------------- */

/* ox_context_set_lora on a split model's context (lora NULL: ox_context_clear_lora): every
 * rank's context applies its share of the adapter. */
enum ox_status split_set_lora(struct ox_context *ctx, struct ox_lora *lora, float scale);
/* The LORA call on rank's context, of shard sh: rank 0's process has the adapter at hand; a
 * rank of another process its copy, made from the call's n bytes the first time. */
enum ox_status split_lora_call(struct ox_context *ctx, struct ox_model *sh,
                               const struct split_call *c, const uint8_t *bytes, size_t n);
/* The LORA call on rank's context, of shard sh (which keeps the rank's shares of adapters). */
enum ox_status split_lora_apply(struct ox_context *ctx, struct ox_model *sh,
                                const struct ox_lora *lora, float scale);

/* Whether a call's failure on one rank may leave the others waiting in its sums: any but the
 * batch checks every rank makes alike before the first sum (a bad token, a full cache). */
bool split_fails_alone(const struct split_call *c, enum ox_status st);

/* A context of split model m (ox_context_create's for such a model), and its end. */
enum ox_status split_context_create(const struct ox_model *m, const struct ox_context_params *p,
                                    struct ox_context **out);
void split_context_free(struct ox_context *ctx);

/* The call on rank's context *slot (CREATE makes it there, of shard sh, in group g; FREE frees
 * it), as a whole model's context would take it. */
enum ox_status split_apply(struct ox_context **slot, const struct ox_model *sh,
                           struct backend_group *g, int rank, struct split_call *c);
/* The call on every rank: those of other processes first (as messages), then this process's
 * (contexts by local rank), then the others' answers. */
enum ox_status split_call_run(struct model_split *sp, struct ox_context **contexts,
                              struct split_call *c);

/* The calls of a split model's context that run on every rank: as the public functions they
 * stand for. */
enum ox_status split_decode(struct ox_context *ctx, const struct ox_batch *b);
enum ox_status split_embed(struct ox_context *ctx, const ox_token *tokens, int32_t n,
                           enum ox_pooling pooling, bool normalize, float *out);
void split_kv(struct ox_context *ctx, enum split_kv_op op, int32_t a, int32_t b, int32_t c,
              int32_t d);
size_t split_state_size(struct ox_context *ctx, int32_t seq);
enum ox_status split_state_save(struct ox_context *ctx, int32_t seq, uint8_t *buf, size_t cap,
                                size_t *written);
enum ox_status split_state_load(struct ox_context *ctx, int32_t seq, const uint8_t *buf,
                                size_t len);
/* The length of a split state at the front of size bytes (a file's, tokens after it). */
enum ox_status split_state_length(const struct ox_context *ctx, const uint8_t *buf, size_t size,
                                  size_t *len);

/* A rank of another process than rank 0's: takes rank 0's calls and answers them until rank 0
 * ends the group (OX_OK) or is lost (an error). */
enum ox_status split_follow(struct ox_model *m);
/* split_follow for `calls` calls (< 0: all), leaving when the next comes: a test's rank that
 * goes in the middle of a call, as a process that died would. */
enum ox_status split_follow_calls(struct ox_model *m, int calls);

void split_wire_free(struct split_wire_room *room);
/* The call as bytes for rank r of another process (*len of them, in room->bytes; NULL when out
 * of memory), and back: c's arrays then point into the room. The answer: status, its message,
 * a number (STATE_SIZE) and bytes (SAVE). */
const uint8_t *split_wire_call(const struct split_call *c, int r, struct split_wire_room *room,
                               size_t *len);
enum ox_status split_wire_read_call(const uint8_t *in, size_t len, struct split_call *c,
                                    struct split_wire_room *room);
const uint8_t *split_wire_answer(enum ox_status st, const char *msg, uint64_t value,
                                 const uint8_t *bytes, size_t n_bytes, struct split_wire_room *room,
                                 size_t *len);
enum ox_status split_wire_read_answer(const uint8_t *in, size_t len, enum ox_status *st,
                                      const char **msg, size_t *msg_len, uint64_t *value,
                                      const uint8_t **bytes, size_t *n_bytes);

#endif
