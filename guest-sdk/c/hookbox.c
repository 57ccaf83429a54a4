/* hookbox.c: the helpers declared in hookbox.h but the JSON parser (hookbox_json.c). See hookbox.h. */
#include "hookbox.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings (hb__xmalloc and hb__xstrndup are shared with hookbox_json.c) ---- */

void *hb__xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) __builtin_trap();
    return p;
}

char *hb__xstrndup(const char *s, size_t n) {
    char *out = hb__xmalloc(n + 1);
    memcpy(out, s, n);
    out[n] = 0;
    return out;
}

bool hb_str_eq(const hook_string_t *s, const char *lit) {
    size_t n = strlen(lit);
    return s->len == n && memcmp(s->ptr, lit, n) == 0;
}

char *hb_cstr(const hook_string_t *s) { return hb__xstrndup((const char *)s->ptr, s->len); }

static char *vformat(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) n = 0;
    char *out = hb__xmalloc((size_t)n + 1);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    return out;
}

char *hb_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = vformat(fmt, ap);
    va_end(ap);
    return out;
}

/* ---- journaled random ---- */

uint64_t hb_random_below(uint64_t n) {
    if (n == 0) return 0;
    /* The largest multiple of n that fits: draws at or above it are redrawn. */
    uint64_t zone = UINT64_MAX - (UINT64_MAX % n + 1) % n;
    for (;;) {
        uint64_t r = hookbox_hooks_host_random();
        if (r <= zone) return r % n;
    }
}

double hb_random_unit(void) {
    return (double)(hookbox_hooks_host_random() >> 11) / 9007199254740992.0; /* 2^53 */
}

double hb_uniform(double a, double b) {
    return a + (b - a) * hb_random_unit();
}

size_t hb_choice(size_t count) {
    return (size_t)hb_random_below((uint64_t)count);
}

void hb_shuffle(void *items, size_t count, size_t size) {
    unsigned char *base = items;
    unsigned char tmp[64];
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)hb_random_below((uint64_t)i);
        unsigned char *a = base + (i - 1) * size, *b = base + j * size;
        if (a == b) continue;
        for (size_t done = 0; done < size; done += sizeof tmp) {
            size_t n = size - done < sizeof tmp ? size - done : sizeof tmp;
            memcpy(tmp, a + done, n);
            memcpy(a + done, b + done, n);
            memcpy(b + done, tmp, n);
        }
    }
}

/* ---- log ---- */

void hb_log(hookbox_hooks_host_log_level_t level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = vformat(fmt, ap);
    va_end(ap);
    hook_string_t s = {(uint8_t *)text, strlen(text)};
    hookbox_hooks_host_log(level, &s);
    free(text);
}

_Noreturn void hb_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = vformat(fmt, ap);
    va_end(ap);
    hook_string_t s = {(uint8_t *)text, strlen(text)};
    hookbox_hooks_host_log(HOOKBOX_HOOKS_HOST_LOG_LEVEL_ERROR, &s);
    __builtin_trap();
}

/* ---- config ---- */

char *hb_config_get(const char *key) {
    hook_string_t k = {(uint8_t *)key, strlen(key)};
    hook_string_t v;
    if (!hookbox_hooks_host_get_config(&k, &v)) return NULL;
    char *out = hb_cstr(&v);
    hook_string_free(&v);
    return out;
}

void hb_config_keys(hb_strlist *keys) {
    hook_list_string_t list;
    hookbox_hooks_host_config_keys(&list);
    keys->len = list.len;
    keys->items = hb__xmalloc(sizeof(char *) * (list.len ? list.len : 1));
    for (size_t i = 0; i < list.len; i++) keys->items[i] = hb_cstr(&list.ptr[i]);
    hook_list_string_free(&list);
}

void hb_strlist_free(hb_strlist *list) {
    for (size_t i = 0; i < list->len; i++) free(list->items[i]);
    free(list->items);
    list->items = NULL;
    list->len = 0;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void trim(const char **start, size_t *len) {
    while (*len && is_ws(**start)) (*start)++, (*len)--;
    while (*len && is_ws((*start)[*len - 1])) (*len)--;
}

bool hb_parse_string_list(const char *raw, hb_strlist *out, char **err) {
    const char *t = raw;
    size_t n = strlen(raw);
    trim(&t, &n);
    out->items = NULL;
    out->len = 0;
    if (n == 0) return true;
    if (t[0] == '[') {
        char *perr = NULL;
        hb_json *v = hb_json_parse(t, n, &perr);
        free(perr);
        if (v && v->kind == HB_JSON_ARRAY) {
            for (size_t i = 0; i < v->len; i++) {
                if (v->items[i].kind != HB_JSON_STRING) {
                    *err = hb_format("expected an array of strings, found %.*s", (int)n, t);
                    hb_json_free(v);
                    return false;
                }
            }
            out->items = hb__xmalloc(sizeof(char *) * (v->len ? v->len : 1));
            out->len = v->len;
            for (size_t i = 0; i < v->len; i++) out->items[i] = hb__xstrndup(v->items[i].string, v->items[i].string_len);
            hb_json_free(v);
            return true;
        }
        hb_json_free(v);
    }
    out->items = hb__xmalloc(sizeof(char *));
    out->items[0] = hb__xstrndup(raw, strlen(raw));
    out->len = 1;
    return true;
}

hb_json *hb_args(const hookbox_hooks_types_tool_call_t *call, char **err) {
    const char *t = (const char *)call->arguments.ptr;
    size_t n = call->arguments.len;
    trim(&t, &n);
    if (n == 0) return hb_json_parse("{}", 2, err);
    return hb_json_parse(t, n, err);
}

/* ---- directives ---- */

static void dup_into(hook_string_t *s, const char *text) { hook_string_dup(s, text); }

void hb_continue(hook_directive_t *ret) { ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_CONTINUE; }

void hb_skip_tool(hook_directive_t *ret, const char *message) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_SKIP_TOOL;
    ret->val.skip_tool.is_some = message != NULL;
    if (message) dup_into(&ret->val.skip_tool.val, message);
}

void hb_replace_arguments(hook_directive_t *ret, const char *json_object) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_REPLACE_ARGUMENTS;
    dup_into(&ret->val.replace_arguments, json_object);
}

void hb_replace_result(hook_directive_t *ret, const char *text) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_REPLACE_RESULT;
    dup_into(&ret->val.replace_result, text);
}

void hb_inject(hook_directive_t *ret, const char *text) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_INJECT_MESSAGE;
    dup_into(&ret->val.inject_message, text);
}

void hb_pause(hook_directive_t *ret) { ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_PAUSE; }

void hb_abort(hook_directive_t *ret, const char *reason) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_ABORT;
    ret->val.abort.is_some = reason != NULL;
    if (reason) dup_into(&ret->val.abort.val, reason);
}

#ifndef HOOKBOX_WIT_0_1_0
void hb_ask_approval(hook_directive_t *ret, const char *reason) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_ASK_APPROVAL;
    dup_into(&ret->val.ask_approval, reason);
}

void hb_skip_model_call(hook_directive_t *ret, const char *reason) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_SKIP_MODEL_CALL;
    dup_into(&ret->val.skip_model_call, reason);
}

void hb_post_message(hook_directive_t *ret, const char *to, const char *text) {
    ret->tag = HOOKBOX_HOOKS_TYPES_DIRECTIVE_POST_MESSAGE;
    dup_into(&ret->val.post_message.to, to);
    dup_into(&ret->val.post_message.text, text);
}
#endif

/* ---- the export ---- */

void hb_run_handler(hb_handler handler, hook_event_t *event, hb_event_context *context, hook_directive_t *ret) {
    hb_continue(ret);
    handler(event, context, ret);
    hook_event_free(event);
#ifndef HOOKBOX_WIT_0_1_0
    if (context) hook_event_context_free(context);
#endif
    hb_flush_stdio();
}

/* ---- globs: a port of glob 0.3's Pattern::new and matches_from ---- */

enum { T_CHAR, T_ANY_CHAR, T_ANY_SEQ, T_ANY_REC, T_WITHIN, T_EXCEPT };
enum { M_MATCH, M_SUB_NO, M_ENTIRE_NO };

typedef struct {
    uint32_t lo, hi;
} spec;

typedef struct {
    int kind;
    uint32_t c;
    spec *specs;
    size_t nspecs;
} token;

struct hb_glob {
    token *tokens;
    size_t len;
};

/* Decodes UTF-8 (assumed valid; a bad byte decodes as itself) into code points. */
static uint32_t *decode(const char *s, size_t *out_len) {
    size_t n = strlen(s);
    uint32_t *cps = hb__xmalloc(sizeof(uint32_t) * (n + 1));
    size_t k = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        if (extra && i + extra >= n) extra = 0;
        uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1Fu) : extra == 2 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t j = 1; j <= extra; j++) cp = (cp << 6) | (u[i + j] & 0x3Fu);
        cps[k++] = cp;
        i += extra + 1;
    }
    *out_len = k;
    return cps;
}

static void add_token(hb_glob *g, token t) {
    g->tokens[g->len++] = t;
}

static void char_specifiers(const uint32_t *cs, size_t n, token *t) {
    t->specs = hb__xmalloc(sizeof(spec) * (n ? n : 1));
    t->nspecs = 0;
    size_t i = 0;
    while (i < n) {
        if (i + 3 <= n && cs[i + 1] == '-') {
            t->specs[t->nspecs++] = (spec){cs[i], cs[i + 2]};
            i += 3;
        } else {
            t->specs[t->nspecs++] = (spec){cs[i], cs[i]};
            i += 1;
        }
    }
}

static long find_close(const uint32_t *cs, size_t from, size_t n) {
    for (size_t k = from; k < n; k++)
        if (cs[k] == ']') return (long)(k - from);
    return -1;
}

hb_glob *hb_glob_new(const char *pattern, char **err) {
    size_t n;
    uint32_t *cs = decode(pattern, &n);
    hb_glob *g = hb__xmalloc(sizeof(hb_glob));
    g->tokens = hb__xmalloc(sizeof(token) * (n ? n : 1));
    g->len = 0;
    size_t i = 0;
    const char *msg = NULL;
    size_t pos = 0;
    while (i < n && !msg) {
        uint32_t c = cs[i];
        if (c == '?') {
            add_token(g, (token){T_ANY_CHAR, 0, NULL, 0});
            i++;
        } else if (c == '*') {
            size_t old = i;
            while (i < n && cs[i] == '*') i++;
            size_t count = i - old;
            if (count > 2) {
                msg = "wildcards are either regular `*` or recursive `**`";
                pos = old + 2;
            } else if (count == 2) {
                if (i == 2 || cs[i - count - 1] == '/') {
                    if (i < n && cs[i] == '/') {
                        i++;
                    } else if (i != n) {
                        msg = "recursive wildcards must form a single path component";
                        pos = i;
                        break;
                    }
                } else {
                    msg = "recursive wildcards must form a single path component";
                    pos = old - 1;
                    break;
                }
                if (!(g->len > 1 && g->tokens[g->len - 1].kind == T_ANY_REC))
                    add_token(g, (token){T_ANY_REC, 0, NULL, 0});
            } else {
                add_token(g, (token){T_ANY_SEQ, 0, NULL, 0});
            }
        } else if (c == '[') {
            if (i + 4 <= n && cs[i + 1] == '!') {
                long j = find_close(cs, i + 3, n);
                if (j >= 0) {
                    token t = {T_EXCEPT, 0, NULL, 0};
                    char_specifiers(cs + i + 2, (size_t)j + 1, &t);
                    add_token(g, t);
                    i += (size_t)j + 4;
                    continue;
                }
            } else if (i + 3 <= n && cs[i + 1] != '!') {
                long j = find_close(cs, i + 2, n);
                if (j >= 0) {
                    token t = {T_WITHIN, 0, NULL, 0};
                    char_specifiers(cs + i + 1, (size_t)j + 1, &t);
                    add_token(g, t);
                    i += (size_t)j + 3;
                    continue;
                }
            }
            msg = "invalid range pattern";
            pos = i;
        } else {
            add_token(g, (token){T_CHAR, c, NULL, 0});
            i++;
        }
    }
    free(cs);
    if (msg) {
        *err = hb_format("Pattern syntax error near position %zu: %s", pos, msg);
        hb_glob_free(g);
        return NULL;
    }
    return g;
}

static bool within(const token *t, uint32_t c) {
    for (size_t k = 0; k < t->nspecs; k++)
        if (t->specs[k].lo <= c && c <= t->specs[k].hi) return true;
    return false;
}

static int matches_from(const hb_glob *g, bool follows_sep, const uint32_t *text, size_t len, size_t pos, size_t ti) {
    while (ti < g->len) {
        const token *t = &g->tokens[ti];
        if (t->kind == T_ANY_SEQ || t->kind == T_ANY_REC) {
            int m = matches_from(g, follows_sep, text, len, pos, ti + 1);
            if (m != M_SUB_NO) return m;
            while (pos < len) {
                uint32_t c = text[pos++];
                follows_sep = c == '/';
                if (t->kind == T_ANY_REC && !follows_sep) continue;
                if (t->kind == T_ANY_SEQ && follows_sep) return M_SUB_NO;
                m = matches_from(g, follows_sep, text, len, pos, ti + 1);
                if (m != M_SUB_NO) return m;
            }
            ti++; /* the text is used up: go on with the next token, as in Rust */
            continue;
        }
        if (pos >= len) return M_ENTIRE_NO;
        uint32_t c = text[pos++];
        bool is_sep = c == '/';
        bool ok;
        if ((t->kind == T_ANY_CHAR || t->kind == T_WITHIN || t->kind == T_EXCEPT) && is_sep) ok = false;
        else if (t->kind == T_ANY_CHAR) ok = true;
        else if (t->kind == T_WITHIN) ok = within(t, c);
        else if (t->kind == T_EXCEPT) ok = !within(t, c);
        else ok = c == t->c;
        if (!ok) return M_SUB_NO;
        follows_sep = is_sep;
        ti++;
    }
    return pos >= len ? M_MATCH : M_SUB_NO;
}

bool hb_glob_matches(const hb_glob *glob, const char *text) {
    size_t n;
    uint32_t *cps = decode(text, &n);
    bool ok = matches_from(glob, true, cps, n, 0, 0) == M_MATCH;
    free(cps);
    return ok;
}

void hb_glob_free(hb_glob *glob) {
    if (!glob) return;
    for (size_t i = 0; i < glob->len; i++) free(glob->tokens[i].specs);
    free(glob->tokens);
    free(glob);
}

/* ---- stdio without WASI ----
 *
 * wasi-libc's stdio (printf, puts, fputs to stdout and stderr, and
 * vsnprintf, which shares its machinery) calls the WASI preview1 functions
 * fd_write, fd_seek, fd_fdstat_get and fd_close. Defining them here resolves
 * those calls inside the module, so the component imports no WASI at all (no
 * adapter and no wasi:filesystem, which Hookbox loads only with a `dirs`
 * grant). Whole lines written to stdout go to the host log at info level,
 * stderr at warn; any other descriptor is EBADF. Build with
 * -DHOOKBOX_NO_STDIO_SHIM to keep libc's real WASI calls instead (then link
 * the preview1 reactor adapter, and grant the plugin a directory).
 */
#ifndef HOOKBOX_NO_STDIO_SHIM
typedef struct {
    uint32_t buf;
    uint32_t len;
} hb_ciovec;

static char *line_buf[3];
static size_t line_len[3];

static void emit_lines(int fd, bool all) {
    size_t start = 0;
    for (size_t i = 0; i < line_len[fd]; i++) {
        if (line_buf[fd][i] == '\n' || (all && i + 1 == line_len[fd])) {
            size_t end = line_buf[fd][i] == '\n' ? i : i + 1;
            if (end > start) {
                hook_string_t s = {(uint8_t *)line_buf[fd] + start, end - start};
                hookbox_hooks_host_log(fd == 1 ? HOOKBOX_HOOKS_HOST_LOG_LEVEL_INFO : HOOKBOX_HOOKS_HOST_LOG_LEVEL_WARN, &s);
            }
            start = i + 1;
        }
    }
    memmove(line_buf[fd], line_buf[fd] + start, line_len[fd] - start);
    line_len[fd] -= start;
}

int32_t __imported_wasi_snapshot_preview1_fd_write(int32_t fd, int32_t iovs, int32_t iovs_len, int32_t nwritten) {
    if (fd != 1 && fd != 2) return 8; /* EBADF */
    const hb_ciovec *v = (const hb_ciovec *)(uintptr_t)iovs;
    size_t total = 0;
    for (int32_t i = 0; i < iovs_len; i++) total += v[i].len;
    char *grown = realloc(line_buf[fd], line_len[fd] + total + 1);
    if (!grown) return 48; /* ENOMEM */
    line_buf[fd] = grown;
    for (int32_t i = 0; i < iovs_len; i++) {
        memcpy(line_buf[fd] + line_len[fd], (const void *)(uintptr_t)v[i].buf, v[i].len);
        line_len[fd] += v[i].len;
    }
    emit_lines(fd, false);
    *(uint32_t *)(uintptr_t)nwritten = (uint32_t)total;
    return 0;
}

int32_t __imported_wasi_snapshot_preview1_fd_seek(int32_t fd, int64_t offset, int32_t whence, int32_t newoffset) {
    (void)fd, (void)offset, (void)whence, (void)newoffset;
    return 70; /* ESPIPE */
}

int32_t __imported_wasi_snapshot_preview1_fd_fdstat_get(int32_t fd, int32_t stat) {
    (void)fd, (void)stat;
    return 8; /* EBADF: stdout is not a terminal, so libc buffers it fully until hb_flush_stdio */
}

int32_t __imported_wasi_snapshot_preview1_fd_close(int32_t fd) {
    (void)fd;
    return 0;
}

void hb_flush_stdio(void) {
    fflush(stdout);
    fflush(stderr);
    for (int fd = 1; fd <= 2; fd++)
        if (line_len[fd]) emit_lines(fd, true);
}
#else
void hb_flush_stdio(void) {
    fflush(stdout);
    fflush(stderr);
}
#endif
