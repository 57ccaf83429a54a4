/*
 * deny-tools in C: the same hook as plugins/deny-tools (Rust), built with
 * wit-bindgen's C generator, clang and wasi-libc. At before-tool-call it
 * answers skip-tool for a denied tool name or a path argument matching a
 * `paths` glob, with the same reason text; every other event continues.
 * Config: tools, paths, path_keys, message (see plugins/README.md). An
 * invalid config traps at the first before-tool-call, as the Rust plugin
 * panics. Differences: whitespace around arguments and config values is
 * trimmed as ASCII whitespace only (Rust also trims other Unicode spaces).
 */
#include <stdlib.h>
#include <string.h>

#include "hookbox.h"

static const char *CONFIG_KEYS[] = {"tools", "paths", "path_keys", "message"};
static const char *DEFAULT_PATH_KEYS[] = {"path", "file", "file_path", "filename", "dir", "directory",
                                          "notebook_path", "absolute_path", "paths", "file_paths", "target_file"};

typedef struct {
    char *text;     /* the pattern as configured, for the reason */
    hb_glob *glob;
    bool whole_path; /* the pattern has a `/`: it matches the whole path */
} path_rule;

typedef struct {
    bool loaded;
    hb_strlist tools;
    path_rule *paths;
    size_t npaths;
    hb_strlist path_keys;
    char *prefix;
} policy;

static policy P;

/* Reads `key` as a string list; *set says whether it was configured. Traps on a bad list. */
static hb_strlist read_list(const char *key, bool *set) {
    hb_strlist out = {NULL, 0};
    char *raw = hb_config_get(key);
    *set = raw != NULL;
    if (!raw) return out;
    char *err = NULL;
    if (!hb_parse_string_list(raw, &out, &err))
        hb_fail("deny-tools: config `%s` must be a string or an array of strings: %s", key, err);
    free(raw);
    return out;
}

static void load_policy(void) {
    hb_strlist keys;
    hb_config_keys(&keys);
    for (size_t i = 0; i < keys.len; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof CONFIG_KEYS / sizeof *CONFIG_KEYS; k++) known |= strcmp(keys.items[i], CONFIG_KEYS[k]) == 0;
        if (!known) hb_warn("deny-tools: unknown config key `%s` ignored", keys.items[i]);
    }
    hb_strlist_free(&keys);

    bool set;
    hb_strlist paths = read_list("paths", &set);
    P.paths = calloc(paths.len ? paths.len : 1, sizeof(path_rule));
    for (size_t i = 0; i < paths.len; i++) {
        const char *t = paths.items[i];
        size_t n = strlen(t);
        while (n && strchr(" \t\n\r\v\f", *t)) t++, n--;
        while (n && strchr(" \t\n\r\v\f", t[n - 1])) n--;
        if (n >= 2 && t[0] == '.' && t[1] == '/') t += 2, n -= 2;
        while (n && t[n - 1] == '/') n--;
        char *trimmed = hb_format("%.*s", (int)n, t);
        char *err = NULL;
        hb_glob *g = hb_glob_new(trimmed, &err);
        if (!g) hb_fail("deny-tools: invalid glob `%s` in `paths`: %s", paths.items[i], err);
        P.paths[i] = (path_rule){strdup(paths.items[i]), g, strchr(trimmed, '/') != NULL};
        free(trimmed);
    }
    P.npaths = paths.len;
    hb_strlist_free(&paths);

    P.path_keys = read_list("path_keys", &set);
    if (!set) {
        size_t n = sizeof DEFAULT_PATH_KEYS / sizeof *DEFAULT_PATH_KEYS;
        P.path_keys.items = malloc(n * sizeof(char *));
        for (size_t i = 0; i < n; i++) P.path_keys.items[i] = strdup(DEFAULT_PATH_KEYS[i]);
        P.path_keys.len = n;
    }

    char *message = hb_config_get("message");
    P.prefix = NULL;
    if (message) {
        const char *t = message;
        size_t n = strlen(t);
        while (n && strchr(" \t\n\r\v\f", *t)) t++, n--;
        while (n && strchr(" \t\n\r\v\f", t[n - 1])) n--;
        if (n) P.prefix = hb_format("%.*s", (int)n, t);
        free(message);
    }
    if (!P.prefix) P.prefix = strdup("deny-tools");
    P.tools = read_list("tools", &set);
    P.loaded = true;
}

/* Splits `path` into components: empty and `.` dropped, `a/..` pairs resolved. */
static size_t normalize(const char *path, char ***out) {
    size_t cap = strlen(path) / 1 + 1, n = 0;
    char **parts = malloc(cap * sizeof(char *));
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (!(len == 0 || (len == 1 && p[0] == '.'))) {
            if (len == 2 && p[0] == '.' && p[1] == '.' && n > 0 && strcmp(parts[n - 1], "..") != 0) {
                free(parts[--n]);
            } else {
                parts[n++] = hb_format("%.*s", (int)len, p);
            }
        }
        if (!slash) break;
        p = slash + 1;
    }
    *out = parts;
    return n;
}

static bool rule_matches(const path_rule *rule, char **parts, size_t n) {
    if (rule->whole_path) {
        size_t total = 0;
        for (size_t i = 0; i < n; i++) total += strlen(parts[i]) + 1;
        char *joined = malloc(total + 1);
        joined[0] = 0;
        size_t at = 0;
        for (size_t k = 0; k < n; k++) {
            if (k) joined[at++] = '/';
            size_t len = strlen(parts[k]);
            memcpy(joined + at, parts[k], len);
            at += len;
            joined[at] = 0;
            if (hb_glob_matches(rule->glob, joined)) {
                free(joined);
                return true;
            }
        }
        free(joined);
        return false;
    }
    for (size_t k = 0; k < n; k++)
        if (hb_glob_matches(rule->glob, parts[k])) return true;
    return false;
}

static const path_rule *matching_rule(const char *path) {
    char **parts;
    size_t n = normalize(path, &parts);
    const path_rule *found = NULL;
    for (size_t i = 0; n && i < P.npaths && !found; i++)
        if (rule_matches(&P.paths[i], parts, n)) found = &P.paths[i];
    for (size_t k = 0; k < n; k++) free(parts[k]);
    free(parts);
    return found;
}

/* The reason to deny, malloc'd, or NULL. `args` may be NULL (arguments that did not parse). */
static char *check(const char *tool, const hb_json *args) {
    for (size_t i = 0; i < P.tools.len; i++)
        if (strcmp(P.tools.items[i], tool) == 0) return hb_format("%s: tool `%s` is denied", P.prefix, tool);
    if (!args || args->kind != HB_JSON_OBJECT) return NULL;
    for (size_t k = 0; k < P.path_keys.len; k++) {
        const hb_json *v = hb_json_get(args, P.path_keys.items[k]);
        if (!v) continue;
        const hb_json *items = v->kind == HB_JSON_STRING ? v : v->kind == HB_JSON_ARRAY ? v->items : NULL;
        size_t count = v->kind == HB_JSON_STRING ? 1 : v->kind == HB_JSON_ARRAY ? v->len : 0;
        for (size_t i = 0; i < count; i++) {
            if (items[i].kind != HB_JSON_STRING) continue;
            const path_rule *rule = matching_rule(items[i].string);
            if (rule)
                return hb_format("%s: `%s` on `%s` is denied (pattern `%s`)", P.prefix, tool, items[i].string, rule->text);
        }
    }
    return NULL;
}

/* The handler (see hookbox.h): it reads no event context, so the same source builds against
 * hookbox:hooks@0.2.0 (c_deny_tools.wasm) and the frozen 0.1.0 (c_deny_tools_v0_1_0.wasm). */
static void on_event(const hook_event_t *event, const hb_event_context *context, hook_directive_t *ret) {
    (void)context;
    if (event->tag != HOOKBOX_HOOKS_TYPES_EVENT_BEFORE_TOOL_CALL) return;
    if (!P.loaded) load_policy();
    const hookbox_hooks_types_tool_call_t *call = &event->val.before_tool_call.call;
    char *name = hb_cstr(&call->name);
    char *err = NULL;
    hb_json *args = hb_args(call, &err);
    if (!args) {
        char *id = hb_cstr(&call->id);
        hb_warn("deny-tools: arguments of `%s` (call %s) are not valid JSON, path rules skipped: %s", name, id, err);
        free(id);
        free(err);
    }
    char *reason = check(name, args);
    if (reason) {
        hb_skip_tool(ret, reason);
        free(reason);
    }
    hb_json_free(args);
    free(name);
}

HB_EXPORT_ON_EVENT(on_event)
