/* hookbox.c: the helpers declared in hookbox.h. See that file. */
#include "hookbox.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings ---- */

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) __builtin_trap();
    return p;
}

static char *xstrndup(const char *s, size_t n) {
    char *out = xmalloc(n + 1);
    memcpy(out, s, n);
    out[n] = 0;
    return out;
}

bool hb_str_eq(const hook_string_t *s, const char *lit) {
    size_t n = strlen(lit);
    return s->len == n && memcmp(s->ptr, lit, n) == 0;
}

char *hb_cstr(const hook_string_t *s) { return xstrndup((const char *)s->ptr, s->len); }

static char *vformat(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) n = 0;
    char *out = xmalloc((size_t)n + 1);
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
    keys->items = xmalloc(sizeof(char *) * (list.len ? list.len : 1));
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
            out->items = xmalloc(sizeof(char *) * (v->len ? v->len : 1));
            out->len = v->len;
            for (size_t i = 0; i < v->len; i++) out->items[i] = xstrndup(v->items[i].string, v->items[i].string_len);
            hb_json_free(v);
            return true;
        }
        hb_json_free(v);
    }
    out->items = xmalloc(sizeof(char *));
    out->items[0] = xstrndup(raw, strlen(raw));
    out->len = 1;
    return true;
}

/* ---- JSON ---- */

typedef struct {
    const char *p, *end;
    const char *err; /* what went wrong (static text), at p */
    int depth;
} parser;

#define JSON_MAX_DEPTH 128

static bool fail(parser *ps, const char *what) {
    if (!ps->err) ps->err = what;
    return false;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool parse_value(parser *ps, hb_json *out);

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(parser *ps, uint32_t *cp) {
    if (ps->end - ps->p < 4) return fail(ps, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(ps->p[i]);
        if (h < 0) return fail(ps, "invalid \\u escape");
        v = v * 16 + (uint32_t)h;
    }
    ps->p += 4;
    *cp = v;
    return true;
}

static size_t put_utf8(char *buf, uint32_t cp) {
    if (cp < 0x80) {
        buf[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        buf[0] = (char)(0xC0 | (cp >> 6));
        buf[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12));
        buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | (cp >> 18));
    buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    buf[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool parse_string(parser *ps, char **out, size_t *out_len) {
    ps->p++; /* the opening quote */
    /* Unescaped text never grows, and an escape (2..12 bytes) never yields more bytes than it takes. */
    char *buf = xmalloc((size_t)(ps->end - ps->p) + 1);
    size_t n = 0;
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            buf[n] = 0;
            *out = buf;
            *out_len = n;
            return true;
        }
        if (c < 0x20) {
            free(buf);
            return fail(ps, "control character in a string");
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            ps->p++;
            continue;
        }
        ps->p++;
        if (ps->p >= ps->end) break;
        char e = *ps->p++;
        uint32_t cp;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u':
            if (!read_hex4(ps, &cp)) {
                free(buf);
                return false;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                uint32_t lo;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                    free(buf);
                    return fail(ps, "lone leading surrogate in hex escape");
                }
                ps->p += 2;
                if (!read_hex4(ps, &lo)) {
                    free(buf);
                    return false;
                }
                if (lo < 0xDC00 || lo >= 0xE000) {
                    free(buf);
                    return fail(ps, "lone leading surrogate in hex escape");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                free(buf);
                return fail(ps, "lone trailing surrogate in hex escape");
            }
            n += put_utf8(buf + n, cp);
            break;
        default:
            free(buf);
            return fail(ps, "invalid escape");
        }
    }
    free(buf);
    return fail(ps, "EOF while parsing a string");
}

static bool parse_number(parser *ps, hb_json *out) {
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (ps->p >= ps->end) return fail(ps, "invalid number");
    if (*ps->p == '0') {
        ps->p++;
    } else if (*ps->p >= '1' && *ps->p <= '9') {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    } else {
        return fail(ps, "invalid number");
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "invalid number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "invalid number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    char *text = xstrndup(s, (size_t)(ps->p - s));
    out->kind = HB_JSON_NUMBER;
    out->number = strtod(text, NULL);
    free(text);
    return true;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return fail(ps, "expected value");
    ps->p += n;
    return true;
}

static void push(hb_json *arr, hb_json item, char *key) {
    /* Grow by doubling: capacity is the next power of two >= len. */
    size_t len = arr->len;
    if ((len & (len - 1)) == 0) {
        size_t cap = len ? len * 2 : 4;
        hb_json *items = xmalloc(sizeof(hb_json) * cap);
        if (len) memcpy(items, arr->items, sizeof(hb_json) * len);
        free(arr->items);
        arr->items = items;
        if (arr->kind == HB_JSON_OBJECT) {
            char **keys = xmalloc(sizeof(char *) * cap);
            if (len) memcpy(keys, arr->keys, sizeof(char *) * len);
            free(arr->keys);
            arr->keys = keys;
        }
    }
    arr->items[len] = item;
    if (arr->kind == HB_JSON_OBJECT) arr->keys[len] = key;
    arr->len = len + 1;
}

static void free_inner(hb_json *v);

static bool parse_container(parser *ps, hb_json *out, bool object) {
    if (++ps->depth > JSON_MAX_DEPTH) return fail(ps, "recursion limit exceeded");
    ps->p++;
    out->kind = object ? HB_JSON_OBJECT : HB_JSON_ARRAY;
    skip_ws(ps);
    char close = object ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return true;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len;
        skip_ws(ps);
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "key must be a string");
            if (!parse_string(ps, &key, &key_len)) return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return fail(ps, "expected `:`");
            }
            ps->p++;
        }
        hb_json item = {0};
        if (!parse_value(ps, &item)) {
            free(key);
            free_inner(&item);
            return false;
        }
        push(out, item, key);
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return true;
        }
        return fail(ps, object ? "expected `,` or `}`" : "expected `,` or `]`");
    }
}

static bool parse_value(parser *ps, hb_json *out) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "EOF while parsing a value");
    switch (*ps->p) {
    case '{': return parse_container(ps, out, true);
    case '[': return parse_container(ps, out, false);
    case '"':
        out->kind = HB_JSON_STRING;
        return parse_string(ps, &out->string, &out->string_len);
    case 't': out->kind = HB_JSON_BOOL; out->boolean = true; return literal(ps, "true");
    case 'f': out->kind = HB_JSON_BOOL; out->boolean = false; return literal(ps, "false");
    case 'n': out->kind = HB_JSON_NULL; return literal(ps, "null");
    default: return parse_number(ps, out);
    }
}

static bool valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; }
        else return false;
        if (i + k >= n) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp < 0xE000))
            return false;
        i += k + 1;
    }
    return true;
}

hb_json *hb_json_parse(const char *text, size_t len, char **err) {
    parser ps = {text, text + len, NULL, 0};
    hb_json *v = xmalloc(sizeof(hb_json));
    memset(v, 0, sizeof *v);
    bool ok = valid_utf8((const unsigned char *)text, len) || fail(&ps, "invalid UTF-8");
    ok = ok && parse_value(&ps, v);
    if (ok) {
        skip_ws(&ps);
        if (ps.p != ps.end) ok = fail(&ps, "trailing characters");
    }
    if (!ok) {
        hb_json_free(v);
        *err = hb_format("%s at byte %zu", ps.err ? ps.err : "invalid JSON", (size_t)(ps.p - text));
        return NULL;
    }
    return v;
}

static void free_inner(hb_json *v) {
    if (!v) return;
    free(v->string);
    for (size_t i = 0; i < v->len; i++) {
        free_inner(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void hb_json_free(hb_json *value) {
    if (!value) return;
    free_inner(value);
    free(value);
}

const hb_json *hb_json_get(const hb_json *object, const char *key) {
    if (!object || object->kind != HB_JSON_OBJECT) return NULL;
    for (size_t i = object->len; i > 0; i--) {
        if (strcmp(object->keys[i - 1], key) == 0) return &object->items[i - 1];
    }
    return NULL;
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
    uint32_t *cps = xmalloc(sizeof(uint32_t) * (n + 1));
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
    t->specs = xmalloc(sizeof(spec) * (n ? n : 1));
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
    hb_glob *g = xmalloc(sizeof(hb_glob));
    g->tokens = xmalloc(sizeof(token) * (n ? n : 1));
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
