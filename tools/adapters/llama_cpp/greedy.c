/* greedy.c — `helios suite decode`'s protocol on llama.cpp: a GGUF model loaded once
 * (every layer on the GPU backend it was built with), then one job a line of stdin,
 * each answered with one JSON line on stdout:
 *
 *   G new t1 .. tP        the prompt in one batch, then new - 1 greedy steps, each fed
 *                         back: {"op":"greedy","tokens":[..new..],"first_ms":x,"step_ms":[..]}
 *   C warm n t1 .. tL     the context in one batch, warm + n steps untimed; the memory
 *                         cleared, the context again, warm steps untimed, n timed:
 *                         {"op":"context","tokens":[..n..],"step_ms":[..n..]}
 *   P t1 .. tP            the prompt in one batch to its first token:
 *                         {"op":"prefill","token":t,"ms":x}
 *
 * A step's time is the host clock around llama_decode and the argmax of its logits
 * (what a greedy llama.cpp user waits for). Usage: greedy MODEL.gguf N_CTX N_BATCH */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

#define MAX_TOKENS (1 << 20)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

typedef struct {
    struct llama_context *ctx;
    int vocab;
} runner;

/* The tokens through llama_decode (one batch), the argmax of the last one's logits;
 * -1 on a failed decode. */
static int feed(runner *r, llama_token *toks, int n) {
    if (llama_decode(r->ctx, llama_batch_get_one(toks, n)) != 0) return -1;
    const float *lg = llama_get_logits_ith(r->ctx, -1);
    if (!lg) return -1;
    int best = 0;
    for (int i = 1; i < r->vocab; i++)
        if (lg[i] > lg[best]) best = i;
    return best;
}

static void reset(runner *r) { llama_memory_clear(llama_get_memory(r->ctx), true); }

/* n steps from token tok, each fed back; their tokens and wall ms into out, ms (ms may be NULL). */
static int steps(runner *r, int tok, int n, int *out, double *ms) {
    for (int i = 0; i < n; i++) {
        llama_token t = tok;
        const double t0 = now_ms();
        tok = feed(r, &t, 1);
        if (ms) ms[i] = now_ms() - t0;
        if (tok < 0) return -1;
        if (out) out[i] = tok;
    }
    return tok;
}

static void print_list(const char *name, const int *v, const double *d, int n) {
    printf("\"%s\":[", name);
    for (int i = 0; i < n; i++) v ? printf("%s%d", i ? "," : "", v[i]) : printf("%s%.6f", i ? "," : "", d[i]);
    printf("]");
}

static int job(runner *r, char op, long *a, int na) {
    int rc = -1, first = 0;
    int *toks = NULL;
    double *ms = NULL;
    llama_token *in = malloc(sizeof *in * (size_t)(na ? na : 1));
    if (!in) return -1;
    for (int i = 0; i < na; i++) in[i] = (llama_token)a[i];
    reset(r);
    if (op == 'P' && na >= 1) {
        const double t0 = now_ms();
        first = feed(r, in, na);
        const double t = now_ms() - t0;
        if (first >= 0) printf("{\"op\":\"prefill\",\"token\":%d,\"ms\":%.6f}\n", first, t);
        rc = first < 0 ? -1 : 0;
    } else if (op == 'G' && na >= 2 && a[0] >= 1) {
        const int n = (int)a[0];
        toks = malloc(sizeof *toks * (size_t)n);
        ms = malloc(sizeof *ms * (size_t)n);
        const double t0 = now_ms();
        if (toks && ms && (first = feed(r, in + 1, na - 1)) >= 0) {
            const double first_ms = now_ms() - t0;
            toks[0] = first;
            if (steps(r, first, n - 1, toks + 1, ms) >= 0) {
                printf("{\"op\":\"greedy\",\"first_ms\":%.6f,", first_ms);
                print_list("tokens", toks, NULL, n);
                putchar(',');
                print_list("step_ms", NULL, ms, n - 1);
                puts("}");
                rc = 0;
            }
        }
    } else if (op == 'C' && na >= 3) {
        const int warm = (int)a[0], n = (int)a[1];
        toks = malloc(sizeof *toks * (size_t)(n ? n : 1));
        ms = malloc(sizeof *ms * (size_t)(n ? n : 1));
        if (toks && ms && (first = feed(r, in + 2, na - 2)) >= 0 && steps(r, first, warm + n, NULL, NULL) >= 0) {
            reset(r);
            int t = feed(r, in + 2, na - 2);
            if (t >= 0 && (t = steps(r, t, warm, NULL, NULL)) >= 0 && steps(r, t, n, toks, ms) >= 0) {
                printf("{\"op\":\"context\",");
                print_list("tokens", toks, NULL, n);
                putchar(',');
                print_list("step_ms", NULL, ms, n);
                puts("}");
                rc = 0;
            }
        }
    }
    free(in);
    free(toks);
    free(ms);
    fflush(stdout);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf N_CTX N_BATCH (jobs on stdin: see greedy.c)\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 999;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "greedy: cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)atoi(argv[2]);
    cp.n_batch = cp.n_ubatch = (uint32_t)atoi(argv[3]);
    runner r = {llama_init_from_model(model, cp), llama_vocab_n_tokens(llama_model_get_vocab(model))};
    if (!r.ctx) {
        fprintf(stderr, "greedy: cannot make a context of %s tokens\n", argv[2]);
        llama_model_free(model);
        return 1;
    }
    static char line[16 << 20];
    long *args = malloc(sizeof *args * MAX_TOKENS);
    int status = args ? 0 : 1;
    while (!status && fgets(line, sizeof line, stdin)) {
        char op = line[0], *p = line + 1, *end;
        int na = 0;
        for (long v = strtol(p, &end, 10); end != p && na < MAX_TOKENS; v = strtol(p, &end, 10)) {
            args[na++] = v;
            p = end;
        }
        if (op == '\n' || op == '\0') continue;
        if (job(&r, op, args, na) != 0) {
            fprintf(stderr, "greedy: job %c with %d numbers failed\n", op, na);
            status = 1;
        }
    }
    free(args);
    llama_free(r.ctx);
    llama_model_free(model);
    llama_backend_free();
    return status;
}
