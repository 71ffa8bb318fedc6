/* engine_int.h: the engine's requests, slots and state, shared by engine.c (the steps) and
 * engine_draft.c (a draft model's guesses for speculative decoding). */
#ifndef OX_ENGINE_ENGINE_INT_H
#define OX_ENGINE_ENGINE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "oxidize.h"

/* A set of LoRA adapters at their scales (none at scale 0), in the order set. */
struct lora_set {
    struct ox_lora_use use[8];
    int32_t n;
};

/* A submitted request: queued, then running in a slot. */
struct job {
    uint64_t id;
    struct ox_request req;
    ox_token *prompt;     /* the engine's copy */
    struct lora_set lora; /* the adapters it runs with */
    bool cancel;          /* set by ox_engine_cancel, read at the next step */
    bool failed;          /* its adapters could not be applied: it ends with an error */
    bool aside;           /* its callbacks run on the delivery thread (engine_deliver.c), */
    bool stopped;         /* which alone reads these two: on_token said stop */
    int32_t n_delivered;  /* tokens given to on_token */
    struct job *next;     /* the queue */
};

/* A KV sequence (id = its index) and the request running in it, if any. */
struct slot {
    struct job *job;
    ox_token *tokens;    /* what the sequence holds: [0, n_past), then the prompt's rest */
    int32_t n_past;      /* tokens in the KV */
    int32_t n_tokens;    /* tokens known: the prompt, then each generated one */
    int32_t n_generated; /* tokens passed to on_token */
    int32_t row;         /* this step's batch row whose logits it samples, or -1 */
    uint32_t lora_gen;   /* the adapters its KV rows were made with (ox_engine's lora_gen) */
    /* speculative decoding: the draft that follows its token in this step's batch (rows row + 1
     * on), and how long the next may be (shorter after one that failed early) */
    ox_token *draft;
    int32_t n_draft, draft_cap;
    /* what sample_ready drew: from row on, while the draft agreed (-1: none) */
    ox_token *next;
    int32_t n_next;
};

/* A draft model's context (engine_draft.c), its sequence i following slot i's tokens. */
struct engine_draft {
    struct ox_context *ctx;
    int32_t n_vocab;    /* tokens it may draft: those the target's vocabulary has too */
    int32_t *n_decoded; /* [n_slots]: how many of slot i's tokens its sequence i holds */
    int32_t *last_row;  /* [n_slots]: slot i's row of logits in the draft's last batch, or -1 */
    ox_token *b_tok;    /* its batches: [n_batch] */
    int32_t *b_pos, *b_seq;
    bool *b_logits;
    int32_t n_batch;
};

/* A request's token for on_token, or (done) its end for on_done. */
struct delivery {
    struct job *job;
    ox_token token;
    bool done;
    enum ox_finish reason;
};

/* The thread that runs requests' callbacks beside the steps (callbacks_aside), and the ring of
 * what it has yet to run. */
struct engine_deliver {
    bool on;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t more, room; /* something to run; room in the ring, or all of it run */
    struct delivery *ring;
    int32_t cap, head, count;
    bool running;   /* one taken from the ring, not yet run through */
    int32_t n_ends; /* requests' ends queued whose on_done has not run */
    bool quit;
};

struct ox_engine {
    const struct ox_model *model;
    struct ox_context *ctx;
    int32_t n_slots, slot_ctx, n_batch, n_ubatch, n_vocab;
    struct slot *slots;
    pthread_mutex_t lock; /* the queue, the cancel flags, next_id and the snapshot */
    struct job *head, *tail;
    int32_t n_queued;
    uint64_t next_id;
    struct ox_engine_stats live;  /* the stepping thread's counters */
    struct ox_engine_stats stats; /* their snapshot, and the slots', under the lock */
    struct ox_engine_slot *slot_view;
    ox_token *b_tok; /* this step's batch: [n_batch] */
    int32_t *b_pos, *b_seq;
    bool *b_logits;
    struct threadpool *pool; /* samples the slots of a pass side by side (sample_ready) */
    struct slot **ready;     /* [n_slots]: the slots whose logits the last pass made */
    int32_t n_ready;
    bool spec;                    /* prompt lookup drafts in each slot: */
    struct ox_spec_params spec_p; /* with these */
    bool draft_now;               /* this step drafts: few enough slots generate */
    int32_t draft_rows;           /* a step with drafts holds at most this many rows */
    bool drafted;                 /* this step's batch holds a draft */
    struct engine_draft draft;    /* a draft model's context, when spec_p names one */
    struct lora_set lora_default; /* what requests without a set of their own take, */
    struct lora_set lora_active;  /* what the context applies now, */
    uint32_t lora_gen;            /* and a count of its changes */
    struct engine_deliver deliver;
};

/* With a draft model (ox_engine_params.spec->draft_model): its context, sized as the engine's.
 * Without: nothing (e->draft.ctx stays NULL). */
enum ox_status engine_draft_init(struct ox_engine *e, const struct ox_engine_params *p);
void engine_draft_free(struct ox_engine *e);
/* Slot i's tokens from keep on are not what its draft sequence holds any more. */
void engine_draft_forget(struct ox_engine *e, int32_t i, int32_t keep);
/* Each slot i with most[i] > 0 gets a draft of up to most[i] tokens after its tokens (into
 * slot->draft, n_draft), greedy from the draft model, ending at a token it gives less than
 * draft_p_min; the slots draft side by side, one batch of the draft model per token. */
enum ox_status engine_draft_make(struct ox_engine *e, const int32_t *most);

/* With callbacks_aside: the delivery thread and its ring (room for cap entries at a time). */
enum ox_status engine_deliver_init(struct ox_engine *e, int32_t cap);
/* Runs what is left, then ends the thread. */
void engine_deliver_free(struct ox_engine *e);
/* Job j's token t for on_token, or its end for on_done (which then frees it), queued behind its
 * earlier ones; waits while the ring is full. Never under e->lock. */
void engine_deliver(struct ox_engine *e, struct job *j, ox_token t, bool done,
                    enum ox_finish reason);
/* Waits until everything queued has run. */
void engine_deliver_wait(struct ox_engine *e);
/* Requests that ended whose on_done has not run yet. */
int32_t engine_deliver_ends(struct ox_engine *e);
void engine_free_job(struct job *j);

#endif
