/* lc-greedy.c — greedy decoding through llama.cpp's own C API (llama.h), on token ids, with the top-2 logits of
 * every step: what scripts/llamacpp/same-model compares with frigg and HF. llama-server's /completion reports
 * probabilities after its sampler chain, llama-simple tokenizes text; this reads ids and prints raw logits, so a
 * divergence can be explained by its margin. Built against a llama.cpp tree by scripts/llamacpp/build.
 *
 *   lc-greedy MODEL.gguf IDS STEPS [--ubatch N] [--threads N] [--noncausal-prefill] [--override-kv KEY=str:VALUE]
 *
 * IDS: comma-separated prompt ids, decoded as one llama_decode call (n_batch = the prompt; llama.cpp splits it into
 * ubatches of --ubatch, default llama.cpp's 512). --noncausal-prefill: llama_set_causal_attn(ctx, false) for that
 * call and true for the decode steps, the one way a llama.cpp caller gets a bidirectional prefix (hrm-text.cpp
 * reads hrm_text.hrm.prefix_lm but builds a causal graph); llama.cpp refuses it (GGML_ASSERT) when the prompt is
 * longer than one ubatch. Prints one JSON line: output_ids, and per step [top1 id, top1 logit, top2 id, top2 logit].
 * --override-kv: llama.cpp's own metadata override (llama-cli's flag; string values only here), e.g.
 * tokenizer.ggml.model=str:llama to load a file whose BPE vocabulary has no merges, which llama.cpp refuses
 * ("cannot find tokenizer merges") although a run on token ids never tokenizes.
 * Greedy = argmax of the f32 logits, ties to the lowest id (as frigg and torch.argmax). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int parse_ids(const char *s, llama_token **out) {
    int n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    *out = malloc(sizeof(llama_token) * (size_t)n);
    int k = 0;
    for (char *end; *s; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s || (*end && *end != ','))
            return -1;
        (*out)[k++] = (llama_token)v;
    }
    return k;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: lc-greedy MODEL.gguf IDS STEPS [--ubatch N] [--threads N] [--noncausal-prefill]"
                        " [--override-kv KEY=str:VALUE]\n");
        return 2;
    }
    int ubatch = 512, threads = 2, noncausal = 0, steps = atoi(argv[3]), nkv = 0;
    struct llama_model_kv_override kv[9];
    memset(kv, 0, sizeof kv);
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--ubatch") && i + 1 < argc)
            ubatch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--noncausal-prefill"))
            noncausal = 1;
        else if (!strcmp(argv[i], "--override-kv") && i + 1 < argc && nkv < 8) {
            const char *a = argv[++i], *eq = strstr(a, "=str:");
            if (!eq || eq - a >= 128 || strlen(eq + 5) >= 128) {
                fprintf(stderr, "lc-greedy: --override-kv takes KEY=str:VALUE (string values only), not '%s'\n", a);
                return 2;
            }
            kv[nkv].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
            memcpy(kv[nkv].key, a, (size_t)(eq - a));
            strcpy(kv[nkv].val_str, eq + 5);
            nkv++;
        } else {
            fprintf(stderr, "lc-greedy: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    llama_token *ids;
    int n = parse_ids(argv[2], &ids);
    if (n < 1 || steps < 1 || ubatch < 1) {
        fprintf(stderr, "lc-greedy: bad IDS, STEPS or --ubatch\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    if (nkv)
        mp.kv_overrides = kv; /* kv[nkv] is zero: the list's end (an empty key) */
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "lc-greedy: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int nv = llama_vocab_n_tokens(vocab);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + steps);
    cp.n_batch = (uint32_t)n;
    cp.n_ubatch = (uint32_t)(ubatch < n ? ubatch : n);
    cp.n_threads = cp.n_threads_batch = threads;
    cp.no_perf = 1;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "lc-greedy: cannot make a context\n");
        return 1;
    }
    int *out = malloc(sizeof(int) * (size_t)steps);
    float *top = malloc(sizeof(float) * 4 * (size_t)steps);
    if (noncausal)
        llama_set_causal_attn(ctx, 0);
    llama_token tok = 0;
    for (int s = 0; s < steps; s++) {
        struct llama_batch b = s == 0 ? llama_batch_get_one(ids, n) : llama_batch_get_one(&tok, 1);
        int rc = llama_decode(ctx, b);
        if (rc != 0) {
            fprintf(stderr, "lc-greedy: llama_decode returned %d at step %d\n", rc, s);
            return 1;
        }
        if (s == 0 && noncausal)
            llama_set_causal_attn(ctx, 1);
        const float *lg = llama_get_logits_ith(ctx, -1);
        int a = 0, c = -1;
        for (int i = 1; i < nv; i++)
            if (lg[i] > lg[a])
                a = i;
        for (int i = 0; i < nv; i++)
            if (i != a && (c < 0 || lg[i] > lg[c]))
                c = i;
        out[s] = a;
        top[4 * s] = (float)a, top[4 * s + 1] = lg[a], top[4 * s + 2] = (float)c, top[4 * s + 3] = lg[c];
        tok = a;
    }
    printf("{\"n_prompt\":%d,\"n_ubatch\":%u,\"noncausal_prefill\":%s,\"output_ids\":[", n, cp.n_ubatch,
           noncausal ? "true" : "false");
    for (int s = 0; s < steps; s++)
        printf("%s%d", s ? "," : "", out[s]);
    printf("],\"top2\":[");
    for (int s = 0; s < steps; s++)
        printf("%s[%d,%.9g,%d,%.9g]", s ? "," : "", (int)top[4 * s], top[4 * s + 1], (int)top[4 * s + 2],
               top[4 * s + 3]);
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(out);
    free(top);
    free(ids);
    return 0;
}
