/* hookbox_json.c: the strict JSON parser declared in hookbox.h (hb_json_parse,
 * hb_json_free, hb_json_get), in a file of its own: compile it with hookbox.c. */
#include "hookbox.h"

#include <stdlib.h>
#include <string.h>

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
    char *buf = hb__xmalloc((size_t)(ps->end - ps->p) + 1);
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
    char *text = hb__xstrndup(s, (size_t)(ps->p - s));
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
        hb_json *items = hb__xmalloc(sizeof(hb_json) * cap);
        if (len) memcpy(items, arr->items, sizeof(hb_json) * len);
        free(arr->items);
        arr->items = items;
        if (arr->kind == HB_JSON_OBJECT) {
            char **keys = hb__xmalloc(sizeof(char *) * cap);
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
    hb_json *v = hb__xmalloc(sizeof(hb_json));
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
