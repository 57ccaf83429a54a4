// deny-tools' policy in plain JavaScript (no component imports), so that it
// also runs under Node (`node --test` in this folder). It mirrors
// plugins/deny-tools/src/lib.rs rule for rule: the same config keys, path
// normalisation, the glob crate's (0.3) pattern syntax and matching with
// require_literal_separator, and the same reasons. Strings are matched by
// Unicode code point, as Rust matches chars.

import { parseStringList } from '../../../guest-sdk/js/hookbox.js';

export const CONFIG_KEYS = ['tools', 'paths', 'path_keys', 'message'];
export const DEFAULT_PATH_KEYS = ['path', 'file', 'file_path', 'filename', 'dir', 'directory',
  'notebook_path', 'absolute_path', 'paths', 'file_paths', 'target_file'];

const CHAR = 0, ANY_CHAR = 1, ANY_SEQ = 2, ANY_REC = 3, WITHIN = 4, EXCEPT = 5;
const MATCH = 0, SUB_NO = 1, ENTIRE_NO = 2;

function globError(pos, msg) {
  return new Error(`Pattern syntax error near position ${pos}: ${msg}`);
}

function charSpecifiers(chars) {
  const out = [];
  let i = 0;
  while (i < chars.length) {
    if (i + 3 <= chars.length && chars[i + 1] === '-') {
      out.push([chars[i], chars[i + 2]]);
      i += 3;
    } else {
      out.push([chars[i], chars[i]]);
      i += 1;
    }
  }
  return out;
}

/** Tokenises `pattern` exactly as glob::Pattern::new does. */
export function compileGlob(pattern) {
  const chars = [...pattern];
  const tokens = [];
  let i = 0;
  while (i < chars.length) {
    const c = chars[i];
    if (c === '?') {
      tokens.push([ANY_CHAR]);
      i += 1;
    } else if (c === '*') {
      const old = i;
      while (i < chars.length && chars[i] === '*') i += 1;
      const count = i - old;
      if (count > 2) throw globError(old + 2, 'wildcards are either regular `*` or recursive `**`');
      if (count === 2) {
        if (i === 2 || chars[i - count - 1] === '/') {
          if (i < chars.length && chars[i] === '/') i += 1;
          else if (i !== chars.length) throw globError(i, 'recursive wildcards must form a single path component');
        } else {
          throw globError(old - 1, 'recursive wildcards must form a single path component');
        }
        if (!(tokens.length > 1 && tokens[tokens.length - 1][0] === ANY_REC)) tokens.push([ANY_REC]);
      } else {
        tokens.push([ANY_SEQ]);
      }
    } else if (c === '[') {
      if (i + 4 <= chars.length && chars[i + 1] === '!') {
        const j = chars.slice(i + 3).indexOf(']');
        if (j >= 0) {
          tokens.push([EXCEPT, charSpecifiers(chars.slice(i + 2, i + 3 + j))]);
          i += j + 4;
          continue;
        }
      } else if (i + 3 <= chars.length && chars[i + 1] !== '!') {
        const j = chars.slice(i + 2).indexOf(']');
        if (j >= 0) {
          tokens.push([WITHIN, charSpecifiers(chars.slice(i + 1, i + 2 + j))]);
          i += j + 3;
          continue;
        }
      }
      throw globError(i, 'invalid range pattern');
    } else {
      tokens.push([CHAR, c]);
      i += 1;
    }
  }
  return tokens;
}

const within = (specs, c) => specs.some(([lo, hi]) => lo <= c && c <= hi);

function matchesFrom(tokens, followsSep, text, pos, ti) {
  while (ti < tokens.length) {
    const [kind, arg] = tokens[ti];
    if (kind === ANY_SEQ || kind === ANY_REC) {
      let m = matchesFrom(tokens, followsSep, text, pos, ti + 1);
      if (m !== SUB_NO) return m;
      while (pos < text.length) {
        const c = text[pos];
        pos += 1;
        followsSep = c === '/';
        if (kind === ANY_REC && !followsSep) continue;
        if (kind === ANY_SEQ && followsSep) return SUB_NO;
        m = matchesFrom(tokens, followsSep, text, pos, ti + 1);
        if (m !== SUB_NO) return m;
      }
      ti += 1; // the text is used up: go on with the next token, as in Rust
      continue;
    }
    if (pos >= text.length) return ENTIRE_NO;
    const c = text[pos];
    pos += 1;
    const isSep = c === '/';
    let ok;
    if ((kind === ANY_CHAR || kind === WITHIN || kind === EXCEPT) && isSep) ok = false;
    else if (kind === ANY_CHAR) ok = true;
    else if (kind === WITHIN) ok = within(arg, c);
    else if (kind === EXCEPT) ok = !within(arg, c);
    else ok = c === arg;
    if (!ok) return SUB_NO;
    followsSep = isSep;
    ti += 1;
  }
  return pos >= text.length ? MATCH : SUB_NO;
}

/** Whether compiled `tokens` match all of `text`. */
export const globMatches = (tokens, text) => matchesFrom(tokens, true, [...text], 0, 0) === MATCH;

/** Components of `path`: empty and `.` dropped, `a/..` pairs resolved (a leading `..` kept). */
export function normalize(path) {
  const out = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..' && out.length > 0 && out[out.length - 1] !== '..') out.pop();
    else out.push(part);
  }
  return out;
}

class PathRule {
  constructor(text) {
    let trimmed = text.trim();
    if (trimmed.startsWith('./')) trimmed = trimmed.slice(2);
    trimmed = trimmed.replace(/\/+$/, '');
    try {
      this.glob = compileGlob(trimmed);
    } catch (e) {
      throw new Error(`deny-tools: invalid glob \`${text}\` in \`paths\`: ${e.message}`);
    }
    this.text = text;
    this.wholePath = trimmed.includes('/');
  }

  matches(components) {
    if (this.wholePath) {
      for (let n = 1; n <= components.length; n++) {
        if (globMatches(this.glob, components.slice(0, n).join('/'))) return true;
      }
      return false;
    }
    return components.some((c) => globMatches(this.glob, c));
  }
}

/** What the plugin denies, read through `get` (key -> raw value or undefined). */
export class Policy {
  constructor(get) {
    const list = (key) => {
      const raw = get(key);
      if (raw === undefined || raw === null) return undefined;
      try {
        return parseStringList(raw);
      } catch (e) {
        throw new Error(`deny-tools: config \`${key}\` must be a string or an array of strings: ${e.message}`);
      }
    };
    this.paths = (list('paths') ?? []).map((p) => new PathRule(p));
    this.pathKeys = list('path_keys') ?? [...DEFAULT_PATH_KEYS];
    const message = (get('message') ?? '').trim();
    this.prefix = message !== '' ? message : 'deny-tools';
    this.tools = list('tools') ?? [];
  }

  /** The reason to deny `tool` with `args` (parsed arguments, or undefined), or undefined to let it run. */
  check(tool, args) {
    if (this.tools.includes(tool)) return `${this.prefix}: tool \`${tool}\` is denied`;
    if (args === null || typeof args !== 'object' || Array.isArray(args)) return undefined;
    for (const key of this.pathKeys) {
      if (!Object.prototype.hasOwnProperty.call(args, key)) continue;
      const value = args[key];
      const paths = typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v) => typeof v === 'string') : [];
      for (const path of paths) {
        const rule = this.matchingRule(path);
        if (rule) return `${this.prefix}: \`${tool}\` on \`${path}\` is denied (pattern \`${rule.text}\`)`;
      }
    }
    return undefined;
  }

  matchingRule(path) {
    const components = normalize(path);
    if (components.length === 0) return undefined;
    return this.paths.find((rule) => rule.matches(components));
  }
}
