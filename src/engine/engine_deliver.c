/* engine_deliver.c: requests' callbacks on a thread beside the steps (callbacks_aside), so a
 * GPU's next step decodes while the host passes the last one's tokens on. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "core/status.h"
#include "engine/engine_int.h"

/* One entry run through: on_token unless the request said stop (the tokens decoded after that
 * are not given), or on_done, after which the job is gone. A stop reaches the steps as a
 * cancel, read at the next one. */
static void run_one(struct ox_engine *e, const struct delivery *d) {
    struct job *j = d->job;
    if (d->done) {
        if (j->req.on_done)
            j->req.on_done(j->req.user, j->stopped ? OX_FINISH_CANCELLED : d->reason,
                           j->n_delivered);
        engine_free_job(j);
        return;
    }
    if (j->stopped)
        return;
    j->n_delivered++;
    if (!j->req.on_token(j->req.user, d->token)) {
        j->stopped = true;
        pthread_mutex_lock(&e->lock);
        j->cancel = true;
        pthread_mutex_unlock(&e->lock);
    }
}

/* Entries taken from the ring at once: the lock is taken once for them, not for each. */
enum { DELIVER_TAKE = 64 };

static void *deliver_thread(void *arg) {
    struct ox_engine *e = arg;
    struct engine_deliver *q = &e->deliver;
    struct delivery taken[DELIVER_TAKE];
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (q->count == 0 && !q->quit)
            pthread_cond_wait(&q->more, &q->lock);
        if (q->count == 0)
            break;
        int n = q->count < DELIVER_TAKE ? q->count : DELIVER_TAKE, ends = 0;
        for (int i = 0; i < n; i++) {
            taken[i] = q->ring[q->head];
            q->head = (q->head + 1) % q->cap;
        }
        q->count -= n;
        q->running = true;
        pthread_cond_broadcast(&q->room); /* room for the engine's next ones */
        pthread_mutex_unlock(&q->lock);
        for (int i = 0; i < n; i++) {
            run_one(e, &taken[i]);
            ends += taken[i].done;
        }
        pthread_mutex_lock(&q->lock);
        q->running = false;
        q->n_ends -= ends;
        pthread_cond_broadcast(&q->room);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

enum ox_status engine_deliver_init(struct ox_engine *e, int32_t cap) {
    struct engine_deliver *q = &e->deliver;
    q->ring = malloc((size_t)cap * sizeof *q->ring);
    if (!q->ring)
        return ox_fail(OX_ERR_OOM, "engine: out of memory");
    q->cap = cap;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->more, NULL);
    pthread_cond_init(&q->room, NULL);
    if (pthread_create(&q->thread, NULL, deliver_thread, e) != 0) {
        pthread_cond_destroy(&q->room), pthread_cond_destroy(&q->more);
        pthread_mutex_destroy(&q->lock);
        free(q->ring), q->ring = NULL;
        return ox_fail(OX_ERR_OOM, "engine: cannot start the callbacks' thread");
    }
    q->on = true;
    return OX_OK;
}

void engine_deliver_free(struct ox_engine *e) {
    struct engine_deliver *q = &e->deliver;
    if (!q->on)
        return;
    pthread_mutex_lock(&q->lock);
    q->quit = true;
    pthread_cond_signal(&q->more);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->room), pthread_cond_destroy(&q->more);
    pthread_mutex_destroy(&q->lock);
    free(q->ring);
    q->on = false;
}

void engine_deliver(struct ox_engine *e, struct job *j, ox_token t, bool done,
                    enum ox_finish reason) {
    struct engine_deliver *q = &e->deliver;
    pthread_mutex_lock(&q->lock);
    while (q->count == q->cap)
        pthread_cond_wait(&q->room, &q->lock);
    q->ring[(q->head + q->count) % q->cap] =
        (struct delivery){.job = j, .token = t, .done = done, .reason = reason};
    q->n_ends += done;
    if (q->count++ == 0) /* else the thread is awake, or about to drain the ring anyway */
        pthread_cond_signal(&q->more);
    pthread_mutex_unlock(&q->lock);
}

void engine_deliver_wait(struct ox_engine *e) {
    struct engine_deliver *q = &e->deliver;
    if (!q->on)
        return;
    pthread_mutex_lock(&q->lock);
    while (q->count > 0 || q->running)
        pthread_cond_wait(&q->room, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

int32_t engine_deliver_ends(struct ox_engine *e) {
    struct engine_deliver *q = &e->deliver;
    if (!q->on)
        return 0;
    pthread_mutex_lock(&q->lock);
    int32_t n = q->n_ends;
    pthread_mutex_unlock(&q->lock);
    return n;
}
