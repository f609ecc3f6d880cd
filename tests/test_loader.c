/* test_loader.c — safetensors + model binding: both layouts, shards, F32, and every rejection case
 * (missing, extra, mis-shaped, overlapping, out-of-bounds tensors; truncated or garbage headers). */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "model/model.h"
#include "model_writer.h"
#include "model/safetensors.h"
#include "base/util.h"

static char *g_tmp;

/* Write a raw safetensors file with the given header text and data size into dir/model.safetensors. */
static void write_raw(const char *dir, const char *header, size_t data_bytes, int lie_len) {
    char *p = frigg_path_join(dir, "model.safetensors");
    FILE *f = fopen(p, "wb");
    uint64_t L = strlen(header) + (uint64_t)lie_len;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(L >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
    free(p);
}

static void expect_model_error(const char *dir, const char *needle, const char *what) {
    frigg_model *m = frigg_model_load(dir);
    CHECK(m == NULL, "%s: loaded", what);
    if (!m) CHECK(strstr(frigg_error(), needle) != NULL, "%s: error \"%s\" lacks \"%s\"", what, frigg_error(), needle);
    frigg_model_free(m);
}

static void expect_st_error(const char *header, size_t data, int lie, const char *needle, const char *what) {
    char *d = frigg_path_join(g_tmp, "raw");
    mkdir(d, 0755);
    write_raw(d, header, data, lie);
    frigg_st_set s;
    int rc = frigg_st_open_dir(&s, d);
    CHECK(rc == -1, "%s: accepted", what);
    if (rc == -1) CHECK(strstr(frigg_error(), needle) != NULL, "%s: error \"%s\" lacks \"%s\"", what, frigg_error(), needle);
    else frigg_st_close(&s);
    free(d);
}

/* A model dir whose tensor list is edited: drop tensor `drop`, add `extra`, or reshape `reshape`. */
static char *edited_model(const char *name, const char *drop, const char *extra, const char *reshape) {
    char *d = frigg_path_join(g_tmp, name);
    mkdir(d, 0755);
    tm_spec s = tm_default();
    tm_write_config(d, &s, NULL);
    tm_tensor *t;
    int n = tm_make_tensors(&s, &t), k = 0;
    for (int i = 0; i < n; i++) {
        if (drop && !strcmp(t[i].name, drop)) {
            free(t[i].data);
            continue;
        }
        if (reshape && !strcmp(t[i].name, reshape)) { /* same bytes, transposed shape */
            int64_t r = t[i].shape[0];
            t[i].shape[0] = t[i].shape[1];
            t[i].shape[1] = r;
        }
        t[k++] = t[i];
    }
    if (extra) {
        t = realloc(t, (k + 1) * sizeof *t);
        memset(&t[k], 0, sizeof t[k]);
        snprintf(t[k].name, sizeof t[k].name, "%s", extra);
        t[k].ndim = 1;
        t[k].shape[0] = 4;
        t[k].data = calloc(4, 2);
        k++;
    }
    char *p = frigg_path_join(d, "model.safetensors");
    tm_write_safetensors(p, t, k, 0);
    free(p);
    tm_free_tensors(t, k);
    return d;
}

int main(void) {
    TEST_MAIN_BEGIN("test_loader");
    g_tmp = tm_tempdir();
    CHECK(g_tmp != NULL, "temp dir");
    if (!g_tmp) TEST_MAIN_END();

    tm_spec s = tm_default();
    char *packed = frigg_path_join(g_tmp, "packed"), *split = frigg_path_join(g_tmp, "split"),
         *sharded = frigg_path_join(g_tmp, "sharded");
    tm_write_model(packed, &s, NULL);
    s.split = 1;
    tm_write_model(split, &s, NULL);
    s.split = 0;
    s.f32 = 1;
    s.shards = 2;
    tm_write_model(sharded, &s, NULL);

    frigg_model *mp = frigg_model_load(packed), *ms = frigg_model_load(split), *mh = frigg_model_load(sharded);
    CHECK(mp && ms && mh, "load: %s", frigg_error());
    if (mp && ms && mh) {
        CHECK(mp->layout == FRIGG_LAYOUT_PACKED && ms->layout == FRIGG_LAYOUT_SPLIT, "layouts");
        CHECK(mp->st.ntensors == 3 + 2 * s.layers * 4 && ms->st.ntensors == 3 + 2 * s.layers * 8,
              "tensor counts %d %d", mp->st.ntensors, ms->st.ntensors);
        CHECK(mh->st.nfiles == 2, "two shards");
        size_t D = s.hidden;
        /* Packed row blocks are gate,q,k,v: the same values as the split tensors of the same name. */
        const frigg_layer *a = &mp->stack[1][1], *b = &ms->stack[1][1], *h = &mh->stack[1][1];
        CHECK(!memcmp(a->gate.w, b->gate.w, D * D * 2) && !memcmp(a->q.w, b->q.w, D * D * 2) &&
                  !memcmp(a->k.w, b->k.w, D * D * 2) && !memcmp(a->v.w, b->v.w, D * D * 2) &&
                  !memcmp(a->o.w, b->o.w, D * D * 2),
              "attention blocks packed == split");
        CHECK(!memcmp(a->mlp_gate.w, b->mlp_gate.w, (size_t)s.inter * D * 2) &&
                  !memcmp(a->up.w, b->up.w, (size_t)s.inter * D * 2) && !memcmp(a->down.w, b->down.w, (size_t)s.inter * D * 2),
              "mlp blocks packed == split");
        CHECK(!memcmp(a->q.w, h->q.w, D * D * 2) && !memcmp(mp->z_L_init, mh->z_L_init, D * 2),
              "F32 shards convert exactly to the same bf16");
        CHECK(mp->n_params == 2ull * s.vocab * D + 2ull * s.layers * (5 * D * D + 3ull * s.inter * D) + D, "param count");
    }
    frigg_model_free(mp);
    frigg_model_free(ms);
    frigg_model_free(mh);

    /* Every tensor is checked by name and shape. */
    char *d;
    d = edited_model("missing", "model.H_module.layers.1.mlp.down_proj.weight", NULL, NULL);
    expect_model_error(d, "missing tensor \"model.H_module.layers.1.mlp.down_proj.weight\"", "missing tensor");
    free(d);
    d = edited_model("extra", NULL, "model.norm.weight", NULL);
    expect_model_error(d, "unexpected tensor \"model.norm.weight\"", "extra tensor");
    free(d);
    d = edited_model("shape", NULL, NULL, "model.L_module.layers.0.mlp.down_proj.weight");
    expect_model_error(d, "model.L_module.layers.0.mlp.down_proj.weight\" has shape", "mis-shaped tensor");
    free(d);
    d = edited_model("mixed", NULL, "model.L_module.layers.0.self_attn.q_proj.weight", NULL);
    expect_model_error(d, "unexpected tensor \"model.L_module.layers.0.self_attn.q_proj.weight\"", "mixed layouts");
    free(d);
    d = frigg_path_join(g_tmp, "badcfg");
    s = tm_default();
    tm_write_model(d, &s, "\"rope_scaling\":{\"factor\":2},");
    expect_model_error(d, "rope_scaling", "config refusal surfaces");
    free(d);
    d = frigg_path_join(g_tmp, "empty");
    mkdir(d, 0755);
    s = tm_default();
    tm_write_config(d, &s, NULL);
    expect_model_error(d, "no model.safetensors", "no weights");
    free(d);

    /* Header-level rejections. */
    expect_st_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[4,12]}}",
                    12, 0, "overlap", "overlapping tensors");
    expect_st_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 4, 0, "past the end",
                    "out of bounds");
    expect_st_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,6]}}", 8, 0, "6 bytes for 4",
                    "size mismatch");
    expect_st_error("{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, 0, "F64", "dtype");
    expect_st_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, 1 << 20,
                    "header length", "header length past the end");
    expect_st_error("{\"a\": garbage", 0, 0, "not valid JSON", "garbage header");
    expect_st_error("[]", 0, 0, "JSON object", "non-object header");
    expect_st_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, 0, "shape", "negative dim");
    expect_st_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,0]}}", 8, 0, "data_offsets",
                    "reversed offsets");
    {
        d = frigg_path_join(g_tmp, "trunc");
        mkdir(d, 0755);
        char *p = frigg_path_join(d, "model.safetensors");
        FILE *f = fopen(p, "wb");
        fwrite("\x10\x00", 1, 2, f);
        fclose(f);
        frigg_st_set st;
        CHECK(frigg_st_open_dir(&st, d) == -1 && strstr(frigg_error(), "truncated"), "truncated file: %s",
              frigg_error());
        free(p);
        free(d);
    }
    /* Index naming a tensor that is not in its shard. */
    {
        s = tm_default();
        s.shards = 2;
        d = frigg_path_join(g_tmp, "badindex");
        tm_write_model(d, &s, NULL);
        char *ip = frigg_path_join(d, "model.safetensors.index.json");
        FILE *f = fopen(ip, "w");
        fprintf(f, "{\"weight_map\":{\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}");
        fclose(f);
        frigg_st_set st;
        CHECK(frigg_st_open_dir(&st, d) == -1, "index/shard mismatch accepted");
        free(ip);
        free(d);
    }
    free(packed);
    free(split);
    free(sharded);
    tm_rmrf(g_tmp);
    free(g_tmp);
    TEST_MAIN_END();
}
