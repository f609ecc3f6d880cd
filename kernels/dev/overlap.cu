/* dev/overlap.cu — does a prompt's prefill gain from running beside a batch of decodes rather than between their
 * steps? Two CUDA engines of one random DFM-Mimir-shaped model on one GPU, each on its own stream and driven by
 * its own thread (backend.h: one thread per engine): engine D decodes --batch sequences (greedy, two steps
 * queued, as frigg-bench decode runs them; rewound to the prompt length every --steps steps, so the context stays
 * in [--prompt, --prompt + --steps)); engine P prefills --group prompts of --prompt random ids per step, each
 * prompt its own bidirectional prefix (what frigg-serve's requests are). Timed for --seconds each:
 *   decode   D alone
 *   prefill  P alone
 *   both     D and P at once
 * and a JSON line per phase (decode tok/s, prefill prompt tok/s, the GPU's clocks and temperature at its end). If
 * the GPU only took turns, each engine's share of its own alone rate would add up to 1 ("sum" in the both line);
 * above 1 is what running a prefill beside the decode steps, instead of between them, could win.
 *   overlap [--batch 64] [--prompt 512] [--group 4] [--steps 256] [--seconds 20] [--seed 1] [--prefill-only]
 * (--prefill-only: the prefill phase alone: how fast prompts of that size prefill by group size.) */
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "engine/backend.h"
#include "base/gpu_state.h"
#include "model/model_random.h"
#include "base/util.h"
}

typedef struct {
    frigg_backend *b;
    int batch, prompt, group, steps, vocab;
    volatile int stop;
    long long units; /* decode: tokens generated; prefill: prompt tokens */
    double ms;
    int rc;
    uint64_t rng;
} worker;

static int32_t rand_id(worker *w) {
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    return 5 + (int32_t)((w->rng >> 33) % (uint64_t)(w->vocab - 5));
}

/* Prompts of random ids into sequences [0, n), `group` per step. */
static int fill(worker *w, int n, int32_t *ids) {
    frigg_row rows[64];
    int32_t out[64];
    for (int s0 = 0; s0 < n; s0 += w->group) {
        int g = n - s0 < w->group ? n - s0 : w->group;
        for (int i = 0; i < g; i++) {
            for (int j = 0; j < w->prompt; j++) ids[(size_t)i * w->prompt + j] = rand_id(w);
            frigg_row r;
            memset(&r, 0, sizeof r); /* C++: no designated initializers without warnings for the rest */
            r.seq = s0 + i;
            r.prefill = 1;
            r.ids = ids + (size_t)i * w->prompt;
            r.n = r.prefix_len = w->prompt;
            r.want = FRIGG_WANT_GREEDY;
            r.out_id = &out[i];
            rows[i] = r;
        }
        if (frigg_step(w->b, rows, g)) return -1;
    }
    return 0;
}

static void *decode_main(void *arg) {
    worker *w = (worker *)arg;
    frigg_row rows[2][64];
    int32_t out[2][64];
    double t0 = frigg_now_ms();
    while (!w->stop && !w->rc) {
        for (int i = 0; i < w->batch && !w->rc; i++)
            if (w->b->seq_fork(w->b, i, i, w->prompt)) w->rc = -1;
        for (int st = 0; st < w->steps && !w->rc; st++) {
            frigg_row *row = rows[st & 1];
            for (int i = 0; i < w->batch; i++) {
                memset(&row[i], 0, sizeof row[i]);
                row[i].seq = i;
                row[i].n = 1;
                row[i].token = st ? FRIGG_TOKEN_LAST_GREEDY : 5 + i;
                row[i].want = FRIGG_WANT_GREEDY;
                row[i].out_id = &out[st & 1][i];
            }
            if (w->b->submit(w->b, row, w->batch) || (st && w->b->collect(w->b))) {
                w->rc = -1;
                break;
            }
            w->units += st ? w->batch : 0; /* the step collected (st - 1) */
            if (w->stop) { /* the window closed: collect the last step, count it */
                if (w->b->collect(w->b)) w->rc = -1;
                w->units += w->batch;
                break;
            }
            if (st == w->steps - 1) {
                if (w->b->collect(w->b)) w->rc = -1;
                w->units += w->batch;
            }
        }
    }
    w->ms = frigg_now_ms() - t0;
    if (w->rc) fprintf(stderr, "overlap: decode: %s\n", frigg_error());
    return NULL;
}

static void *prefill_main(void *arg) {
    worker *w = (worker *)arg;
    int32_t *ids = (int32_t *)frigg_xmalloc(sizeof(int32_t) * (size_t)w->group * w->prompt);
    double t0 = frigg_now_ms();
    while (!w->stop && !w->rc) {
        if (fill(w, w->group, ids)) w->rc = -1;
        else w->units += (long long)w->group * w->prompt;
    }
    w->ms = frigg_now_ms() - t0;
    if (w->rc) fprintf(stderr, "overlap: prefill: %s\n", frigg_error());
    free(ids);
    return NULL;
}

/* Run the given workers for `seconds`, each in its own thread. */
static int run_phase(worker **ws, int n, double seconds) {
    pthread_t th[2];
    for (int i = 0; i < n; i++) {
        ws[i]->stop = 0;
        ws[i]->units = 0;
        ws[i]->rc = 0;
        pthread_create(&th[i], NULL, ws[i]->batch ? decode_main : prefill_main, ws[i]);
    }
    double t0 = frigg_now_ms();
    const struct timespec tick = {0, 20 * 1000 * 1000};
    while (frigg_now_ms() - t0 < seconds * 1e3) nanosleep(&tick, NULL);
    for (int i = 0; i < n; i++) ws[i]->stop = 1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        rc |= ws[i]->rc;
    }
    return rc;
}

static double rate(const worker *w) { return w->ms > 0 ? w->units / (w->ms / 1e3) : 0.0; }

int main(int argc, char **argv) {
    int batch = 64, prompt = 512, group = 4, steps = 256, seed = 1;
    double seconds = 20;
    int prefill_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--prefill-only")) {
            prefill_only = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "overlap: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--batch")) batch = atoi(v);
        else if (!strcmp(a, "--prompt")) prompt = atoi(v);
        else if (!strcmp(a, "--group")) group = atoi(v);
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--seconds")) seconds = atof(v);
        else if (!strcmp(a, "--seed")) seed = atoi(v);
        else {
            fprintf(stderr, "overlap: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (batch < 1 || batch > 64 || group < 1 || group > 64 || prompt < 1 || steps < 2 || seconds <= 0) {
        fprintf(stderr, "overlap: --batch 1..64, --group 1..64, --prompt >= 1, --steps >= 2, --seconds > 0\n");
        return 2;
    }
    frigg_config c;
    frigg_config_mimir(&c);
    frigg_model *m = frigg_model_random(&c, (uint64_t)seed, 8.0f);
    if (!m) {
        fprintf(stderr, "overlap: %s\n", frigg_error());
        return 1;
    }
    frigg_backend_opts od, op;
    memset(&od, 0, sizeof od);
    memset(&op, 0, sizeof op);
    od.max_seqs = batch;
    od.max_ctx = prompt + steps + 1;
    op.max_seqs = group;
    op.max_ctx = prompt;
    frigg_backend *bd = frigg_backend_create("cuda", m, &od), *bp = bd ? frigg_backend_create("cuda", m, &op) : NULL;
    if (!bd || !bp) {
        fprintf(stderr, "overlap: %s\n", frigg_error());
        return 1;
    }
    worker wd = {bd, batch, prompt, group, steps, c.vocab_size, 0, 0, 0, 0, 0x9E3779B97F4A7C15ull ^ (uint64_t)seed};
    worker wp = {bp, 0, prompt, group, steps, c.vocab_size, 0, 0, 0, 0, 0xD1B54A32D192ED03ull ^ (uint64_t)seed};
    int32_t *ids = (int32_t *)frigg_xmalloc(sizeof(int32_t) * (size_t)group * prompt);
    if (fill(&wd, batch, ids)) { /* the decode engine's prompts (with wd's own group size) */
        fprintf(stderr, "overlap: %s\n", frigg_error());
        return 1;
    }
    free(ids);
    worker *both[2] = {&wd, &wp}, *d1[1] = {&wd}, *p1[1] = {&wp};
    /* warm-up: graphs, cuBLAS's first calls */
    if ((!prefill_only && run_phase(d1, 1, 2)) || run_phase(p1, 1, 2)) return 1;
    double d_alone = 0, p_alone = 0;
    const char *phase[3] = {"decode", "prefill", "both"};
    for (int ph = prefill_only; ph < (prefill_only ? 2 : 3); ph++) {
        int rc = ph == 0 ? run_phase(d1, 1, seconds) : ph == 1 ? run_phase(p1, 1, seconds) : run_phase(both, 2, seconds);
        if (rc) return 1;
        double dr = ph != 1 ? rate(&wd) : 0, pr = ph != 0 ? rate(&wp) : 0;
        if (ph == 0) d_alone = dr;
        if (ph == 1) p_alone = pr;
        printf("{\"bench\":\"overlap\",\"phase\":\"%s\",\"batch\":%d,\"prompt\":%d,\"group\":%d,\"steps\":%d,"
               "\"seconds\":%.1f,\"decode_tok_s\":%.1f,\"prefill_tok_s\":%.1f",
               phase[ph], batch, prompt, group, steps, seconds, dr, pr);
        if (ph == 2)
            printf(",\"decode_share\":%.3f,\"prefill_share\":%.3f,\"sum\":%.3f", dr / d_alone, pr / p_alone,
                   dr / d_alone + pr / p_alone);
        frigg_gpu_state st; /* read at the phase's end */
        char gs[256];
        frigg_gpu_state_read(0, &st);
        frigg_gpu_state_json(&st, gs, sizeof gs);
        printf(",%s}\n", gs);
        fflush(stdout);
    }
    frigg_backend_destroy(bp);
    frigg_backend_destroy(bd);
    frigg_model_free(m);
    return 0;
}
