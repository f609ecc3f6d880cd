/* test_gsm8k — common/eval/gsm8k.h: numbers and their normal form, the gold of every answer in the committed test
 * split (../shared/data/gsm8k/test.jsonl, skipped with a SKIP line when absent), extraction from real and
 * malformed outputs (GSM8K solutions themselves, the phrasings instruction-tuned models use, what the bundled
 * tiny model writes, outputs with no answer, a "####" with nothing after it, numbers too long to be one),
 * the exemplar cleaning and prompt form, and the Wilson interval against known values. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/gsm8k.h"
#include "harness.h"

static void norm_is(const char *in, const char *want) {
    char out[FRIGG_GSM8K_NUM_MAX];
    int rc = frigg_gsm8k_normalize(in, strlen(in), out);
    if (want) CHECK(rc == 0 && !strcmp(out, want), "normalize(\"%s\") = %d \"%s\", want \"%s\"", in, rc, out, want);
    else CHECK(rc == -1, "normalize(\"%s\") = %d \"%s\", want not a number", in, rc, out);
}

/* extract(text) gives want by how (1 "####", 2 last number, 0 none) */
static void ext_is(const char *text, frigg_gsm8k_mode mode, int how, const char *want) {
    char out[FRIGG_GSM8K_NUM_MAX];
    int rc = frigg_gsm8k_extract(text, strlen(text), mode, out);
    CHECK(rc == how && !strcmp(out, want), "extract(mode %d, \"%s\") = %d \"%s\", want %d \"%s\"", (int)mode, text, rc,
          out, how, want);
}

static void test_normalize(void) {
    norm_is("18", "18");
    norm_is("$18", "18");
    norm_is("18.00", "18");
    norm_is("2.50", "2.5");
    norm_is("0.50", "0.5");
    norm_is(".5", "0.5");
    norm_is("007", "7");
    norm_is("0", "0");
    norm_is("-0", "0");
    norm_is("-0.0", "0");
    norm_is("-5", "-5");
    norm_is("-$5", "-5");
    norm_is("$-5", "-5");
    norm_is("1,000", "1000");
    norm_is("1,450,000", "1450000");
    norm_is("$1,234.50", "1234.5");
    norm_is("10.", NULL);  /* the period is not part of the number */
    norm_is("1,23", NULL); /* two numbers */
    norm_is("12345,678", NULL);
    norm_is("1,2345", NULL);
    norm_is("18 dollars", NULL);
    norm_is("", NULL);
    norm_is("-", NULL);
    norm_is("$", NULL);
    norm_is("abc", NULL);
    /* 70 digits: no number */
    norm_is("1234567890123456789012345678901234567890123456789012345678901234567890", NULL);
}

static void test_scan(void) {
    const char *s = "16-3-4=9 eggs, 1,234 or 1,23; x-5 and = -5, 3rd, 18. 3.14.15";
    const char *want[] = {"16", "3", "4", "9", "1234", "1", "23", "5", "-5", "3", "18", "3.14", "0.15"};
    size_t pos = 0, st, en;
    char out[FRIGG_GSM8K_NUM_MAX];
    int k = 0;
    while (frigg_gsm8k_next_number(s, strlen(s), &pos, out, &st, &en)) {
        CHECK(k < 13 && !strcmp(out, want[k]), "number %d of the scan: \"%s\", want \"%s\"", k, out, k < 13 ? want[k] : "none");
        CHECK(en > st && en <= strlen(s), "number %d: bad span %zu..%zu", k, st, en);
        k++;
    }
    CHECK(k == 13, "the scan found %d numbers, want 13", k);
    /* a digit run too long to be a number is skipped whole; the number after it is found */
    const char *l = "9999999999999999999999999999999999999999999999999999999999999999999999 then 4";
    pos = 0;
    CHECK(frigg_gsm8k_next_number(l, strlen(l), &pos, out, NULL, NULL) && !strcmp(out, "4"), "after a long run: \"%s\"",
          out);
}

static void test_gold(void) {
    char out[FRIGG_GSM8K_NUM_MAX];
    /* the first three answers of the test split, verbatim */
    const char *a0 = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day "
                     "at the farmer\xe2\x80\x99s market.\n#### 18";
    const char *a2 = "The cost of the house and repairs came out to 80,000+50,000=$<<80000+50000=130000>>130,000\nHe "
                     "increased the value of the house by 80,000*1.5=<<80000*1.5=120000>>120,000\nSo the new value of the "
                     "house is 120,000+80,000=$<<120000+80000=200000>>200,000\nSo he made a profit of "
                     "200,000-130,000=$<<200000-130000=70000>>70,000\n#### 70000";
    CHECK(frigg_gsm8k_gold(a0, out) == 0 && !strcmp(out, "18"), "gold a0 \"%s\"", out);
    CHECK(frigg_gsm8k_gold(a2, out) == 0 && !strcmp(out, "70000"), "gold a2 \"%s\"", out);
    CHECK(frigg_gsm8k_gold("so 2,125 in all.\n#### 2,125", out) == 0 && !strcmp(out, "2125"), "gold with a comma \"%s\"", out);
    CHECK(frigg_gsm8k_gold("#### 1\n#### 2", out) == 0 && !strcmp(out, "2"), "the last #### \"%s\"", out);
    CHECK(frigg_gsm8k_gold("no final line", out) == -1 && !out[0], "no ####");
    CHECK(frigg_gsm8k_gold("#### ", out) == -1, "#### with nothing");
    CHECK(frigg_gsm8k_gold("#### ten", out) == -1, "#### ten");

    /* every answer of the committed test split */
    char *path = th_path(th_shared(), "data/gsm8k/test.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) {
        SKIP("%s not found (FRIGG_SHARED): the whole-split gold checks", path);
        free(path);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    int n = 0, ok = 0, commas = 0, negs = 0, matches_tail = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *ans = json_string_value(json_object_get(o, "answer"));
        n++;
        if (ans && frigg_gsm8k_gold(ans, out) == 0) {
            ok++;
            negs += out[0] == '-';
            const char *tail = strstr(ans, "#### ") + 5;
            commas += strchr(tail, ',') != NULL;
            /* the tail with its commas removed is the normal form */
            char t[FRIGG_GSM8K_NUM_MAX];
            size_t k = 0;
            for (const char *p = tail; *p && k + 1 < sizeof t; p++)
                if (*p != ',') t[k++] = *p;
            t[k] = 0;
            matches_tail += !strcmp(t, out);
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    free(path);
    CHECK(n == 1319 && ok == 1319, "gold parsed for %d of %d answers", ok, n);
    CHECK(commas == 14 && negs == 2, "golds with thousands separators %d (want 14), negative %d (want 2)", commas, negs);
    CHECK(matches_tail == 1319, "%d golds equal their final line without commas", matches_tail);
}

static void test_extract(void) {
    const frigg_gsm8k_mode H = FRIGG_GSM8K_HASH_OR_LAST, L = FRIGG_GSM8K_LAST;
    /* a GSM8K solution as a few-shot answer writes it */
    ext_is(" Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day at the farmer\xe2\x80\x99s "
           "market.\n#### 18",
           H, 1, "18");
    ext_is(" He runs 3*3=9 sprints\nSo he runs 9*60=540 meters\n#### 540\n\nQuestion: Every day, Wendi feeds", H, 1, "540");
    ext_is(" So he made a profit of 200,000-130,000=$70,000\n#### 70,000", H, 1, "70000");
    ext_is("#### $1,234.50.", H, 1, "1234.5");
    ext_is("####18", H, 1, "18");
    ext_is("#### -3", H, 1, "-3");
    ext_is("#### 18 dollars", H, 1, "18");
    ext_is("#### 5 and then #### 6", H, 1, "5");
    /* malformed: "####" with no number falls back to the last number; strict counts it as invalid */
    ext_is("She has 5 apples.\n####", H, 2, "5");
    ext_is("She has 5 apples.\n#### five", H, 2, "5");
    ext_is("#### \n#### 7", H, 1, "7");
    /* instruction-tuned phrasings: the last number */
    ext_is("The answer is 18.", L, 2, "18");
    ext_is("Janet makes $18 every day. The final answer is $\\boxed{18}$", L, 2, "18");
    ext_is("**Answer: 1,000 kr.**", L, 2, "1000");
    ext_is("3 + 4 = 7, so she has 7 left (7.0).", L, 2, "7");
    ext_is("It costs 2.50 dollars", L, 2, "2.5");
    ext_is("She loses -$5 on each.", L, 2, "-5");
    ext_is("Step 1: 16-3-4=9", L, 2, "9");
    /* "####" is ignored in chat mode: the last number wins */
    ext_is("#### 5 but 6", L, 2, "6");
    /* no answer at all */
    ext_is("", H, 0, "");
    ext_is(" I am sure I am sure I am sure I am a little more than I am sure I am not to think of my own.", H, 0, "");
    ext_is("- Ja, sagde Huus.", L, 0, "");
    ext_is("$ - . , ####", H, 0, "");
}

static void test_prompt(void) {
    char *c = frigg_gsm8k_clean_solution("9 * 2 = $<<9*2=18>>18 every day\n#### 18");
    CHECK(!strcmp(c, "9 * 2 = $18 every day\n#### 18"), "clean: \"%s\"", c);
    free(c);
    c = frigg_gsm8k_clean_solution("a <<b and no close");
    CHECK(!strcmp(c, "a <<b and no close"), "clean, unclosed: \"%s\"", c);
    free(c);
    const char *q[] = {"Q1?", "Q2?"}, *a[] = {"x=<<1+1=2>>2\n#### 2", "#### 3"};
    char *p = frigg_gsm8k_prompt(q, a, 2, "Q3?");
    CHECK(!strcmp(p, "Question: Q1?\nAnswer: x=2\n#### 2\n\nQuestion: Q2?\nAnswer: #### 3\n\nQuestion: Q3?\nAnswer:"),
          "prompt: \"%s\"", p);
    free(p);
    p = frigg_gsm8k_prompt(NULL, NULL, 0, "Q?");
    CHECK(!strcmp(p, "Question: Q?\nAnswer:"), "zero-shot prompt: \"%s\"", p);
    free(p);
}

static void test_wilson(void) {
    double lo, hi, z = 1.959963984540054;
    /* the closed form at k = 0 and k = n: n / (n + z^2) bounds the far end; 50/100: the textbook [0.4038, 0.5962] */
    frigg_wilson(50, 100, z, &lo, &hi);
    CHECK(fabs(lo - 0.4038315) < 1e-6 && fabs(hi - 0.5961685) < 1e-6, "wilson 50/100: [%.7f, %.7f]", lo, hi);
    frigg_wilson(0, 10, z, &lo, &hi);
    CHECK(lo == 0 && fabs(hi - 0.2775328) < 1e-6, "wilson 0/10: [%.7f, %.7f]", lo, hi);
    frigg_wilson(10, 10, z, &lo, &hi);
    CHECK(fabs(lo - 0.7224672) < 1e-6 && hi == 1, "wilson 10/10: [%.7f, %.7f]", lo, hi);
    frigg_wilson(0, 0, z, &lo, &hi);
    CHECK(lo == 0 && hi == 1, "wilson 0/0: [%g, %g]", lo, hi);
}

int main(void) {
    TEST_MAIN_BEGIN("test_gsm8k");
    test_normalize();
    test_scan();
    test_gold();
    test_extract();
    test_prompt();
    test_wilson();
    TEST_MAIN_END();
}
