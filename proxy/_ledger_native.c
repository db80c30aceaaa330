/*
 * proxy._ledger_native: the decision ledger's row encoder for the usual case, in C.
 *
 * rows(out, pos, head, wall, req, client, latency_ms, decisions, spans, frame, answer,
 *      version, contexts, make_context)
 * writes the JSON line of one ledger entry (schema v2: the entry's fields, then
 * one array per partition) into the bytearray ``out`` from ``pos``, byte for
 * byte what proxy.ledger_rows.RowFormatter.python_lines writes for it, and
 * returns the new end (``pos`` for an entry without partitions); -1 when ``out``
 * has no room for it (nothing meaningful was written); None when this entry is
 * not the usual case: the caller then uses the Python encoder, which stays the
 * reference and handles every case.
 *
 * ``spans`` is a list of each decision's record-set span ((start, end) or None),
 * or, when the decisions are every partition of the request in its order, the
 * request's tuple of TopicData, whose partitions' ``records`` are read here
 * (no list built per request).
 *
 * The usual case: the broker's answer (if any) is a well-formed Produce v3-v13
 * response whose partitions are exactly the entry's forwarded decisions, in
 * the same order. Anything else (a malformed, truncated or reordered answer,
 * a duplicate, a missing partition) returns None: this code never decides
 * what a malformed frame means, it only declines.
 *
 * Invariants: every read of a frame is bounds-checked against its length;
 * the GIL is held throughout (frames are immutable bytes-backed buffers);
 * errors raised by Python callbacks propagate as exceptions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BATCH_HEADER_SIZE 61
#define BATCH_LENGTH_OVERHEAD 12
#define FIRST_LOG_START_OFFSET_VERSION 5
#define FIRST_RECORD_ERRORS_VERSION 8
#define FIRST_FLEXIBLE_VERSION 9
#define FIRST_TOPIC_ID_VERSION 13

typedef struct {
    const unsigned char *key;
    Py_ssize_t key_len;
    int32_t index;
    int16_t error;
    int64_t offset;
    Py_ssize_t topic;
} result_t;

#define MAX_PAIRWISE_TOPICS 16
#define MAX_CHECKED_PARTITION 65536

typedef struct {
    const unsigned char *p;
    Py_ssize_t pos, end;
    int ok;
} reader_t;

static int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                     ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int16_t be16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

static int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

static int need(reader_t *r, Py_ssize_t n) {
    if (!r->ok || n < 0 || r->end - r->pos < n) {
        r->ok = 0;
        return 0;
    }
    return 1;
}

static void skip(reader_t *r, Py_ssize_t n) {
    if (need(r, n))
        r->pos += n;
}

/* At most 5 bytes, like protocol.primitives.read_uvarint (so up to 35 bits). */
static int64_t uvarint(reader_t *r) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (!need(r, 1))
            return -1;
        unsigned char b = r->p[r->pos++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            return (int64_t)result;
    }
    r->ok = 0;
    return -1;
}

/* A length: compact (an unsigned varint, minus one) or big-endian of ``width`` bytes. */
static int64_t raw_length(reader_t *r, int flexible, int width) {
    if (flexible)
        return uvarint(r) - 1;
    if (!need(r, width))
        return -1;
    int64_t n = width == 4 ? be32(r->p + r->pos) : be16(r->p + r->pos);
    r->pos += width;
    return n;
}

/* A non-null array length that cannot exceed the bytes left. */
static Py_ssize_t array_len(reader_t *r, int flexible) {
    int64_t n = raw_length(r, flexible, 4);
    if (!r->ok || n < 0 || n > r->end - r->pos) {
        r->ok = 0;
        return -1;
    }
    return (Py_ssize_t)n;
}

/* A string's bytes (nullable or not); its length, or -1 for null. */
static Py_ssize_t string_len(reader_t *r, int flexible) {
    int64_t n = raw_length(r, flexible, 2);
    if (!r->ok || n < -1) {
        r->ok = 0;
        return -1;
    }
    return (Py_ssize_t)n;
}

static void skip_nullable_string(reader_t *r, int flexible) {
    Py_ssize_t n = string_len(r, flexible);
    if (n > 0)
        skip(r, n);
}

static void skip_tags(reader_t *r) {
    int64_t count = uvarint(r);
    for (int64_t i = 0; r->ok && i < count; i++) {
        uvarint(r); /* tag */
        int64_t size = uvarint(r);
        if (r->ok)
            skip(r, (Py_ssize_t)size);
    }
}

static int compare_keys(const void *a, const void *b) {
    const result_t *x = *(const result_t *const *)a, *y = *(const result_t *const *)b;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return memcmp(x->key, y->key, (size_t)x->key_len);
}

/* Is a topic named twice among the answer's topics (each given by its first result)? */
static int topic_repeated(const result_t **firsts, Py_ssize_t n) {
    if (n <= MAX_PAIRWISE_TOPICS) {
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                if (compare_keys(&firsts[i], &firsts[j]) == 0)
                    return 1;
        return 0;
    }
    qsort(firsts, (size_t)n, sizeof(firsts[0]), compare_keys);
    for (Py_ssize_t i = 1; i < n; i++)
        if (compare_keys(&firsts[i - 1], &firsts[i]) == 0)
            return 1;
    return 0;
}

/* No (topic, partition) answered twice: with a duplicate, the Python encoder's
   mapping keeps the last answer, and in-order matching would not. Declines
   (returns 0) for a partition index outside 0..MAX_CHECKED_PARTITION-1. Returns -1
   with an exception set when out of memory. */
static int all_distinct(const result_t *results, Py_ssize_t n) {
    static unsigned char seen[MAX_CHECKED_PARTITION / 8]; /* all clear between calls */
    const result_t **firsts = PyMem_Malloc(sizeof(result_t *) * (size_t)(n ? n : 1));
    Py_ssize_t n_firsts = 0, group = 0;
    int distinct = 1;
    if (firsts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n && distinct; i++) {
        const result_t *r = &results[i];
        if (i == 0 || r->topic != results[i - 1].topic) {
            firsts[n_firsts++] = r;
            for (Py_ssize_t j = group; j < i; j++) /* clear the previous topic's bits */
                seen[results[j].index >> 3] = 0;
            group = i;
        }
        if (r->index < 0 || r->index >= MAX_CHECKED_PARTITION)
            distinct = 0;
        else if (seen[r->index >> 3] & (1 << (r->index & 7)))
            distinct = 0;
        else
            seen[r->index >> 3] |= (unsigned char)(1 << (r->index & 7));
    }
    for (Py_ssize_t j = group; j < n; j++)
        if (results[j].index >= 0 && results[j].index < MAX_CHECKED_PARTITION)
            seen[results[j].index >> 3] = 0;
    if (distinct && topic_repeated(firsts, n_firsts))
        distinct = 0;
    PyMem_Free(firsts);
    return distinct;
}

/* The answer's partitions into *out (PyMem-allocated); their count, or -1 when the
   answer is not a well-formed response of this version. */
static Py_ssize_t read_results(const unsigned char *p, Py_ssize_t len, int version,
                               result_t **out) {
    reader_t r = {p, 0, len, 1};
    int flexible = version >= FIRST_FLEXIBLE_VERSION;
    Py_ssize_t cap = 0, n = 0;
    result_t *results = NULL;
    *out = NULL;
    if (len < 8 || be32(p) != len - 4)
        return -1;
    r.pos = 8; /* size, correlation id */
    if (flexible)
        skip_tags(&r);
    Py_ssize_t n_topics = array_len(&r, flexible);
    for (Py_ssize_t t = 0; r.ok && t < n_topics; t++) {
        const unsigned char *key;
        Py_ssize_t key_len;
        if (version >= FIRST_TOPIC_ID_VERSION) {
            key_len = 16;
        } else {
            key_len = string_len(&r, flexible);
            if (key_len < 0)
                r.ok = 0; /* a null topic name */
        }
        if (!need(&r, key_len))
            break;
        key = p + r.pos;
        r.pos += key_len;
        Py_ssize_t n_parts = array_len(&r, flexible);
        if (r.ok && n_parts == 0 && version < FIRST_TOPIC_ID_VERSION) {
            /* The Python reader refuses a name that is not UTF-8. A name with partitions
               is checked by matching it to a decision's (valid) name; one without is not. */
            PyObject *name = PyUnicode_DecodeUTF8((const char *)key, key_len, "strict");
            if (name == NULL) {
                PyErr_Clear();
                r.ok = 0;
            }
            Py_XDECREF(name);
        }
        for (Py_ssize_t i = 0; r.ok && i < n_parts; i++) {
            if (!need(&r, 4 + 2 + 8 + 8))
                break;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                result_t *grown = PyMem_Realloc(results, (size_t)cap * sizeof(result_t));
                if (grown == NULL) {
                    PyMem_Free(results);
                    PyErr_NoMemory();
                    return -2;
                }
                results = grown;
            }
            const unsigned char *q = p + r.pos;
            results[n].key = key;
            results[n].key_len = key_len;
            results[n].index = be32(q);
            results[n].error = be16(q + 4);
            results[n].offset = be64(q + 6);
            results[n].topic = t;
            n++;
            r.pos += 4 + 2 + 8 + 8; /* index, error, base offset, log append time */
            if (version >= FIRST_LOG_START_OFFSET_VERSION)
                skip(&r, 8);
            if (version >= FIRST_RECORD_ERRORS_VERSION) {
                Py_ssize_t n_errors = array_len(&r, flexible);
                for (Py_ssize_t e = 0; r.ok && e < n_errors; e++) {
                    skip(&r, 4); /* batch index */
                    skip_nullable_string(&r, flexible);
                    if (flexible)
                        skip_tags(&r);
                }
                skip_nullable_string(&r, flexible); /* error message */
            }
            if (flexible)
                skip_tags(&r);
        }
        if (flexible)
            skip_tags(&r);
    }
    skip(&r, 4); /* throttle time */
    if (flexible)
        skip_tags(&r);
    int distinct = r.ok && r.pos == r.end ? all_distinct(results, n) : 0;
    if (distinct != 1) {
        PyMem_Free(results);
        if (distinct < 0)
            return -2;
        return -1;
    }
    *out = results;
    return n;
}

/* Records in a record set (the sum of its batches' counts), or -1 when a batch
   header is one protocol.produce_request.record_count refuses. */
static int64_t record_count(const unsigned char *p, Py_ssize_t len, Py_ssize_t pos,
                            Py_ssize_t end) {
    int64_t total = 0;
    if (!(0 <= pos && pos <= end && end <= len))
        return -1;
    while (pos < end) {
        if (end - pos < BATCH_HEADER_SIZE)
            return -1;
        int32_t length = be32(p + pos + 8);
        if (length < BATCH_HEADER_SIZE - BATCH_LENGTH_OVERHEAD)
            return -1;
        if ((signed char)p[pos + 16] != 2)
            return -1;
        int32_t count = be32(p + pos + 57);
        if (count < 0)
            return -1;
        if ((int64_t)length + BATCH_LENGTH_OVERHEAD > (int64_t)(end - pos))
            return -1;
        total += count;
        pos += BATCH_LENGTH_OVERHEAD + length;
    }
    return total;
}

/* The output: the caller's bytearray from ``len`` on, never past ``cap``. */
typedef struct {
    char *buf;
    size_t len, cap;
} out_t;

static int room(const out_t *o, size_t n) {
    return o->cap - o->len >= n;
}

static void put(out_t *o, const char *s, size_t n) {
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

#define PUT_LITERAL(o, s) put((o), (s), sizeof(s) - 1)

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal, two digits per division (this ran a fifth of the encoder's time). */
static size_t format_int(char *dst, int64_t v) {
    if (v >= 0 && v < 10) {
        *dst = (char)('0' + v);
        return 1;
    }
    char tmp[24];
    int i = 24;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) {
        unsigned pair = (unsigned)(u % 100);
        u /= 100;
        i -= 2;
        memcpy(tmp + i, DIGIT_PAIRS + 2 * pair, 2);
    }
    if (u >= 10) {
        i -= 2;
        memcpy(tmp + i, DIGIT_PAIRS + 2 * u, 2);
    } else {
        tmp[--i] = (char)('0' + u);
    }
    if (v < 0)
        tmp[--i] = '-';
    memcpy(dst, tmp + i, (size_t)(24 - i));
    return (size_t)(24 - i);
}

static void put_int(out_t *o, int64_t v) {
    o->len += format_int(o->buf + o->len, v);
}

/* x * scale rounded half up, written with ``digits`` decimals after dividing by
   10**digits (proxy.ledger_rows.fixed); "null" when not finite. Returns the length
   (at most 40), or 0 when x * scale is beyond the integers a double holds exactly. */
static size_t format_fixed(char *dst, double x, double scale, int digits) {
    if (!isfinite(x)) {
        memcpy(dst, "null", 4);
        return 4;
    }
    double scaled = fabs(x) * scale + 0.5;
    if (scaled >= 9007199254740992.0)
        return 0;
    int64_t n = (int64_t)floor(scaled), unit = 1;
    for (int i = 0; i < digits; i++)
        unit *= 10;
    char *p = dst;
    if (x < 0 && n != 0)
        *p++ = '-';
    p += format_int(p, n / unit);
    *p++ = '.';
    int64_t frac = n % unit;
    for (int i = digits - 1; i >= 0; i--) {
        p[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    return (size_t)(p + digits - dst);
}

/* Does a decision's topic key (str name or bytes id) equal a topic key read from the answer? */
static int key_equals(PyObject *key, const unsigned char *bytes, Py_ssize_t len) {
    const char *data;
    Py_ssize_t size;
    if (PyUnicode_Check(key)) {
        data = PyUnicode_AsUTF8AndSize(key, &size);
        if (data == NULL) {
            PyErr_Clear(); /* a lone surrogate: cannot be on the wire; decline */
            return 0;
        }
    } else if (PyBytes_Check(key)) {
        data = PyBytes_AS_STRING(key);
        size = PyBytes_GET_SIZE(key);
    } else {
        return 0;
    }
    return size == len && memcmp(data, bytes, (size_t)len) == 0;
}

/* The context (verdict, required racks, row fragment, synthetic code) of decision d,
   borrowed from contexts[topic key][partition], made by make_context(d) when missing
   or made for another verdict. *topic_key and *partitions (strong references) keep
   the previous decision's topic, the usual next one. */
static PyObject *lookup_context(PyObject *contexts, PyObject *make_context, PyObject *d,
                                PyObject **topic_key, PyObject **partitions, long long *made) {
    PyObject *key = PyTuple_GET_ITEM(d, 0), *partition = PyTuple_GET_ITEM(d, 2);
    if (key != *topic_key || *partitions == NULL) {
        PyObject *found = PyDict_GetItemWithError(contexts, key);
        if (found == NULL) {
            if (PyErr_Occurred())
                return NULL;
            found = PyDict_New();
            if (found == NULL)
                return NULL;
            if (PyDict_SetItem(contexts, key, found) < 0) {
                Py_DECREF(found);
                return NULL;
            }
        } else {
            Py_INCREF(found);
        }
        Py_XSETREF(*partitions, found);
        Py_XSETREF(*topic_key, Py_NewRef(key)); /* held: compared by identity */
    }
    PyObject *context = PyDict_GetItemWithError(*partitions, partition);
    if (context == NULL && PyErr_Occurred())
        return NULL;
    if (context != NULL && PyTuple_Check(context) && PyTuple_GET_SIZE(context) == 4 &&
        PyTuple_GET_ITEM(context, 0) == PyTuple_GET_ITEM(d, 3)) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(context, 1), PyTuple_GET_ITEM(d, 4),
                                            Py_EQ);
        if (same < 0)
            return NULL;
        if (same)
            return context;
    }
    (*made)++;
    PyObject *fresh = PyObject_CallOneArg(make_context, d);
    if (fresh == NULL)
        return NULL;
    if (!PyTuple_Check(fresh) || PyTuple_GET_SIZE(fresh) != 4 ||
        !PyBytes_Check(PyTuple_GET_ITEM(fresh, 2))) {
        Py_DECREF(fresh);
        PyErr_SetString(PyExc_TypeError,
                        "rows(): make_context must return (verdict, required, bytes, code)");
        return NULL;
    }
    int failed = PyDict_SetItem(*partitions, partition, fresh);
    Py_DECREF(fresh); /* the dict holds it */
    return failed ? NULL : fresh;
}

static PyObject *str_partitions, *str_records; /* interned at import */

/* The next partition's record-set span (a new reference), walking the TopicData tuple
   ``topics``: *topic_at and *part_at are the position, *parts (a new reference) the
   current topic's partitions. NULL with an exception when the walk runs out or an
   object is not what a walked request holds. */
static PyObject *next_walked_span(PyObject *topics, Py_ssize_t *topic_at, PyObject **parts,
                                  Py_ssize_t *part_at) {
    while (*parts == NULL || *part_at >= PyTuple_GET_SIZE(*parts)) {
        Py_CLEAR(*parts);
        if (*topic_at >= PyTuple_GET_SIZE(topics)) {
            PyErr_SetString(PyExc_ValueError, "rows(): fewer partitions than decisions");
            return NULL;
        }
        PyObject *found = PyObject_GetAttr(PyTuple_GET_ITEM(topics, *topic_at), str_partitions);
        if (found == NULL)
            return NULL;
        if (!PyTuple_Check(found)) {
            Py_DECREF(found);
            PyErr_SetString(PyExc_TypeError, "rows(): a topic's partitions are not a tuple");
            return NULL;
        }
        *parts = found;
        (*topic_at)++;
        *part_at = 0;
    }
    return PyObject_GetAttr(PyTuple_GET_ITEM(*parts, (*part_at)++), str_records);
}

/* 1 when the walk left partitions unread, 0 when none, -1 with an exception. */
static int walked_partitions_left(PyObject *topics, Py_ssize_t topic_at, PyObject *parts,
                                  Py_ssize_t part_at) {
    if (parts != NULL && part_at < PyTuple_GET_SIZE(parts))
        return 1;
    for (; topic_at < PyTuple_GET_SIZE(topics); topic_at++) {
        PyObject *rest = PyObject_GetAttr(PyTuple_GET_ITEM(topics, topic_at), str_partitions);
        if (rest == NULL)
            return -1;
        Py_ssize_t left = PyObject_Length(rest);
        Py_DECREF(rest);
        if (left != 0)
            return left < 0 ? -1 : 1;
    }
    return 0;
}

#define ENC_FULL (-1)    /* no room in out */
#define ENC_DECLINE (-2) /* not the usual case: the Python encoder does it */
#define ENC_ERROR (-3)   /* an exception is set */

/* One entry's line into the bytearray out_obj from pos (see the module docstring):
   the new end, or ENC_FULL, ENC_DECLINE, ENC_ERROR. ``spans`` is a list (one per
   decision) or the request's TopicData tuple; ``latency`` is NaN for null.
   *made counts the contexts made (make_context calls). */
static Py_ssize_t encode_entry(PyObject *out_obj, Py_ssize_t pos, PyObject *head, double wall,
                               long long req, PyObject *client, double latency,
                               PyObject *decisions, PyObject *spans, PyObject *frame_obj,
                               PyObject *answer_obj, long version, PyObject *contexts,
                               PyObject *make_context, long long *made) {
    int walk = PyTuple_Check(spans); /* the request's topics, not a list of spans */
    if (!PyByteArray_Check(out_obj) || !PyBytes_Check(head) || !PyBytes_Check(client) ||
        !(walk || PyList_Check(spans)) || !PyDict_Check(contexts)) {
        PyErr_SetString(PyExc_TypeError, "rows(): bad argument types");
        return ENC_ERROR;
    }
    if (pos < 0 || pos > PyByteArray_GET_SIZE(out_obj)) {
        PyErr_SetString(PyExc_ValueError, "rows(): pos outside the buffer");
        return ENC_ERROR;
    }
    PyObject *seq = PySequence_Fast(decisions, "decisions must be a sequence");
    if (seq == NULL)
        return ENC_ERROR;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (!walk && PyList_GET_SIZE(spans) != n) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "rows(): one span per decision");
        return ENC_ERROR;
    }

    Py_buffer frame = {0}, answer = {0}, target = {0};
    int have_answer = answer_obj != Py_None;
    result_t *results = NULL;
    Py_ssize_t n_results = 0, cursor = 0;
    Py_ssize_t ret = ENC_ERROR;
    PyObject *topic_key = NULL, *partitions = NULL;
    PyObject *row_decision = NULL, *row_context = NULL, *row_span = NULL;
    PyObject *walk_parts = NULL;
    Py_ssize_t walk_topic = 0, walk_part = 0;
    double last_age = NAN; /* differs from every age: the first row formats its own */
    char age_text[48], latency_text[48];
    size_t age_n = 0, latency_n = 4;
    out_t out = {NULL, (size_t)pos, 0};

    /* an export: the bytearray cannot be resized under us while a callback runs */
    if (PyObject_GetBuffer(out_obj, &target, PyBUF_WRITABLE) < 0)
        goto done;
    out.buf = target.buf;
    out.cap = (size_t)target.len;

    if (isnan(latency))
        memcpy(latency_text, "null", 4);
    else if ((latency_n = format_fixed(latency_text, latency, 1000.0, 3)) == 0)
        goto decline;
    if (PyObject_GetBuffer(frame_obj, &frame, PyBUF_SIMPLE) < 0)
        goto done;
    if (have_answer) {
        if (PyObject_GetBuffer(answer_obj, &answer, PyBUF_SIMPLE) < 0)
            goto done;
        if (version < 3 || version > 13)
            goto decline;
        n_results = read_results(answer.buf, answer.len, (int)version, &results);
        if (n_results == -2)
            goto done;
        if (n_results < 0)
            goto decline;
    }
    if (n > 0) { /* the entry's fields, once */
        size_t head_n = (size_t)PyBytes_GET_SIZE(head);
        size_t client_n = (size_t)PyBytes_GET_SIZE(client);
        if (!room(&out, head_n + client_n + latency_n + 120))
            goto full;
        put(&out, PyBytes_AS_STRING(head), head_n);
        size_t ts_n = format_fixed(out.buf + out.len, wall, 1e6, 6);
        if (ts_n == 0 || ts_n == 4) /* beyond exact integers, or not finite */
            goto decline;
        out.len += ts_n;
        PUT_LITERAL(&out, ",\"req\":");
        put_int(&out, req);
        PUT_LITERAL(&out, ",");
        put(&out, PyBytes_AS_STRING(client), client_n);
        PUT_LITERAL(&out, "\"latency_ms\":");
        put(&out, latency_text, latency_n);
        PUT_LITERAL(&out, ",\"partitions\":[");
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* the row's objects are held for the row: a callback (make_context) runs Python */
        Py_CLEAR(row_decision);
        Py_CLEAR(row_context);
        Py_CLEAR(row_span);
        if (i >= PySequence_Fast_GET_SIZE(seq) || (!walk && i >= PyList_GET_SIZE(spans))) {
            PyErr_SetString(PyExc_RuntimeError, "rows(): decisions or spans changed size");
            goto done;
        }
        PyObject *d = row_decision = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        if (walk) {
            if ((row_span = next_walked_span(spans, &walk_topic, &walk_parts, &walk_part)) == NULL)
                goto done;
        } else {
            row_span = Py_NewRef(PyList_GET_ITEM(spans, i));
        }
        if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) < 10) {
            PyErr_SetString(PyExc_TypeError, "rows(): a decision is not a Decision");
            goto done;
        }
        PyObject *context = lookup_context(contexts, make_context, d, &topic_key, &partitions,
                                           made);
        if (context == NULL)
            goto done;
        row_context = Py_NewRef(context);
        PyObject *text = PyTuple_GET_ITEM(context, 2), *code_obj = PyTuple_GET_ITEM(context, 3);

        double age = PyFloat_AsDouble(PyTuple_GET_ITEM(d, 9));
        if (age == -1.0 && PyErr_Occurred())
            goto done;
        if (!(age == last_age)) { /* NaN compares unequal: formatted each time, as in Python */
            last_age = age;
            if ((age_n = format_fixed(age_text, age, 1e6, 3)) == 0)
                goto decline;
        }

        int64_t records = 0, size = 0;
        PyObject *span = row_span;
        if (span != Py_None) {
            if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 2) {
                PyErr_SetString(PyExc_TypeError, "rows(): a span is not (start, end)");
                goto done;
            }
            Py_ssize_t start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
            Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
            if (PyErr_Occurred())
                goto done;
            size = (int64_t)end - (int64_t)start;
            records = record_count(frame.buf, frame.len, start, end);
        }

        size_t text_n = (size_t)PyBytes_GET_SIZE(text);
        /* the rest of the array: the context, 5 numbers of at most 24 bytes, the age */
        if (!room(&out, 1 + text_n + 140 + age_n))
            goto full;
        if (i > 0)
            PUT_LITERAL(&out, ",");
        put(&out, PyBytes_AS_STRING(text), text_n);
        if (code_obj != Py_None) { /* the proxy answered this partition itself */
            long long code = PyLong_AsLongLong(code_obj);
            if (code == -1 && PyErr_Occurred())
                goto done;
            put_int(&out, code);
            PUT_LITERAL(&out, ",null,null");
        } else if (!have_answer) {
            PUT_LITERAL(&out, "null,null,null");
        } else {
            if (cursor >= n_results)
                goto decline;
            result_t *res = &results[cursor];
            long partition = PyLong_AsLong(PyTuple_GET_ITEM(d, 2));
            if (partition == -1 && PyErr_Occurred())
                goto done;
            if (partition != res->index ||
                !key_equals(PyTuple_GET_ITEM(d, 0), res->key, res->key_len))
                goto decline;
            cursor++;
            put_int(&out, res->error);
            PUT_LITERAL(&out, ",");
            put_int(&out, res->error);
            PUT_LITERAL(&out, ",");
            put_int(&out, res->offset);
        }
        PUT_LITERAL(&out, ",");
        put_int(&out, records);
        PUT_LITERAL(&out, ",");
        put_int(&out, size);
        PUT_LITERAL(&out, ",");
        put(&out, age_text, age_n);
        PUT_LITERAL(&out, "]");
    }
    if (walk && walked_partitions_left(spans, walk_topic, walk_parts, walk_part) != 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "rows(): more partitions than decisions");
        goto done;
    }
    if (cursor != n_results)
        goto decline; /* answers for partitions the entry does not record */
    if (n > 0) {
        if (!room(&out, 3))
            goto full;
        PUT_LITERAL(&out, "]}\n");
    }
    ret = (Py_ssize_t)out.len;
    goto done;
full:
    ret = ENC_FULL;
    goto done;
decline:
    ret = ENC_DECLINE;
done:
    Py_XDECREF(row_decision);
    Py_XDECREF(row_context);
    Py_XDECREF(row_span);
    Py_XDECREF(walk_parts);
    Py_XDECREF(partitions);
    Py_XDECREF(topic_key);
    PyMem_Free(results);
    if (frame.obj != NULL)
        PyBuffer_Release(&frame);
    if (answer.obj != NULL)
        PyBuffer_Release(&answer);
    if (target.obj != NULL)
        PyBuffer_Release(&target);
    Py_DECREF(seq);
    return ret;
}

#define N_ARGS 14

/* rows(out, pos, head, wall, req, client, latency_ms, decisions, spans, frame, answer,
        version, contexts, make_context) -> int | None: see the module docstring. */
static PyObject *rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != N_ARGS) {
        PyErr_SetString(PyExc_TypeError, "rows() takes 14 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    double wall = PyFloat_AsDouble(args[3]);
    long long req = PyLong_AsLongLong(args[4]);
    double latency = args[6] == Py_None ? NAN : PyFloat_AsDouble(args[6]);
    long version = PyLong_AsLong(args[11]);
    if (PyErr_Occurred())
        return NULL;
    long long made = 0;
    Py_ssize_t end = encode_entry(args[0], pos, args[2], wall, req, args[5], latency, args[7],
                                  args[8], args[9], args[10], version, args[12], args[13], &made);
    if (end == ENC_ERROR)
        return NULL;
    if (end == ENC_DECLINE)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(end);
}

/* ----- the completion fast path: the usual forwarded entry, from the broker's answer
   to its line in the open chunk, without running Python.

   Chunk: an encoded-rows buffer (proxy.ledger_chunks): buf, end, rows, opened.
   Sink: what the fast path needs of the ledger, one per ledger: the open chunk it may
   add to (None: every entry takes the Python path, ``slow``), the queue's counters
   and bounds, and the loop encoder's current context cache; the Python side keeps
   them current (proxy.ledger, proxy.ledger_chunks, RowFormatter.attach).
   Pending: one forwarded entry (the attributes of proxy.ledger_rows.ProduceEntry,
   plus the sink, the time it went upstream and the wrapped transform); calling it
   with the broker's answer records the answer and the latency, adds the entry's line
   to the open chunk when the usual case holds and everything fits, otherwise calls
   ``sink.slow(entry)``, then returns ``transform(frame, version)``. The fast path
   never drops or counts anything: whatever it does not do, the Python path does,
   from the start. */

typedef struct {
    PyObject_HEAD
    PyObject *buf;
    Py_ssize_t end, rows;
    double opened;
} Chunk;

static void chunk_dealloc(Chunk *self) {
    Py_XDECREF(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *chunk_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *buf;
    double opened;
    static char *names[] = {"buf", "opened", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Od:Chunk", names, &buf, &opened))
        return NULL;
    Chunk *self = (Chunk *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->buf = Py_NewRef(buf);
    self->end = self->rows = 0;
    self->opened = opened;
    return (PyObject *)self;
}

static PyMemberDef chunk_members[] = {
    {"buf", T_OBJECT, offsetof(Chunk, buf), 0, "the buffer (a bytearray)"},
    {"end", T_PYSSIZET, offsetof(Chunk, end), 0, "the bytes of buf that hold rows"},
    {"rows", T_PYSSIZET, offsetof(Chunk, rows), 0, "the rows in buf[:end]"},
    {"opened", T_DOUBLE, offsetof(Chunk, opened), 0, "the clock when the chunk was opened"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "proxy._ledger_native.Chunk",
    .tp_doc = "Chunk(buf, opened): encoded ledger rows, buf[:end], rows of them.",
    .tp_basicsize = sizeof(Chunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = chunk_new,
    .tp_dealloc = (destructor)chunk_dealloc,
    .tp_members = chunk_members,
};

typedef struct {
    PyObject_HEAD
    PyObject *slow, *clock, *chunk;
    double seal_after;
    long long rows_in, bytes_in, rows_out, bytes_out, max_rows, max_bytes, fast_entries;
    PyObject *head, *clients, *view, *observe, *dedicated, *table, *make;
    long long made_left;
} Sink;

static PyTypeObject SinkType;

#define SINK_OBJECTS(X) X(slow) X(clock) X(chunk) X(head) X(clients) X(view) X(observe) \
    X(dedicated) X(table) X(make)

static int sink_traverse(Sink *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    SINK_OBJECTS(VISIT)
#undef VISIT
    return 0;
}

static int sink_clear(Sink *self) {
#define CLEAR(f) Py_CLEAR(self->f);
    SINK_OBJECTS(CLEAR)
#undef CLEAR
    return 0;
}

static void sink_dealloc(Sink *self) {
    PyObject_GC_UnTrack(self);
    sink_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *sink_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *slow, *clock;
    double seal_after;
    long long max_rows, max_bytes;
    static char *names[] = {"slow", "clock", "seal_after", "max_rows", "max_bytes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOdLL:Sink", names, &slow, &clock,
                                     &seal_after, &max_rows, &max_bytes))
        return NULL;
    Sink *self = (Sink *)type->tp_alloc(type, 0); /* zeroed; tracked by the GC */
    if (self == NULL)
        return NULL;
    self->slow = Py_NewRef(slow);
    self->clock = Py_NewRef(clock);
    self->seal_after = seal_after;
    self->max_rows = max_rows;
    self->max_bytes = max_bytes;
#define NONE_IF_UNSET(f) if (self->f == NULL) self->f = Py_NewRef(Py_None);
    SINK_OBJECTS(NONE_IF_UNSET)
#undef NONE_IF_UNSET
    return (PyObject *)self;
}

static PyMemberDef sink_members[] = {
    {"slow", T_OBJECT, offsetof(Sink, slow), 0, "slow(entry): the Python path"},
    {"clock", T_OBJECT, offsetof(Sink, clock), 0, "the ledger's monotonic clock"},
    {"chunk", T_OBJECT, offsetof(Sink, chunk), 0,
     "the open Chunk the fast path may add to, or None"},
    {"seal_after", T_DOUBLE, offsetof(Sink, seal_after), 0,
     "a chunk this old (from opened) takes the Python path, which seals it"},
    {"rows_in", T_LONGLONG, offsetof(Sink, rows_in), 0, "rows queued (the event loop's)"},
    {"bytes_in", T_LONGLONG, offsetof(Sink, bytes_in), 0, "bytes queued (the event loop's)"},
    {"rows_out", T_LONGLONG, offsetof(Sink, rows_out), 0, "rows taken (the writer's)"},
    {"bytes_out", T_LONGLONG, offsetof(Sink, bytes_out), 0, "bytes taken (the writer's)"},
    {"max_rows", T_LONGLONG, offsetof(Sink, max_rows), 0, "the queue's bound in rows"},
    {"max_bytes", T_LONGLONG, offsetof(Sink, max_bytes), 0, "the queue's bound in bytes"},
    {"fast_entries", T_LONGLONG, offsetof(Sink, fast_entries), 0,
     "entries the fast path added"},
    {"head", T_OBJECT, offsetof(Sink, head), 0, "the line's opening (bytes)"},
    {"clients", T_OBJECT, offsetof(Sink, clients), 0,
     "{(client_id, peer): fragment}, the encoder's client cache"},
    {"view", T_OBJECT, offsetof(Sink, view), 0, "the view the context table is for"},
    {"observe", T_OBJECT, offsetof(Sink, observe), 0, "the mode the table is for"},
    {"dedicated", T_OBJECT, offsetof(Sink, dedicated), 0, "the code the table is for"},
    {"table", T_OBJECT, offsetof(Sink, table), 0, "the contexts (see rows())"},
    {"make", T_OBJECT, offsetof(Sink, make), 0, "make_context (see rows())"},
    {"made_left", T_LONGLONG, offsetof(Sink, made_left), 0,
     "contexts the fast path may still make in this table"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "proxy._ledger_native.Sink",
    .tp_doc = "Sink(slow, clock, seal_after, max_rows, max_bytes): the state the "
              "completion fast path reads and updates (see the module).",
    .tp_basicsize = sizeof(Sink),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = sink_new,
    .tp_dealloc = (destructor)sink_dealloc,
    .tp_traverse = (traverseproc)sink_traverse,
    .tp_clear = (inquiry)sink_clear,
    .tp_members = sink_members,
};

typedef struct {
    PyObject_HEAD
    double wall, sent_at;
    long long req;
    int version;
    PyObject *client_id, *peer, *request, *frame, *decisions, *view, *observe,
        *dedicated_code, *answer, *latency_ms, *ledger, *transform;
    vectorcallfunc vectorcall;
} Pending;

#define PENDING_OBJECTS(X) X(client_id) X(peer) X(request) X(frame) X(decisions) X(view) \
    X(observe) X(dedicated_code) X(answer) X(latency_ms) X(ledger) X(transform)

static PyTypeObject PendingType;
static PyObject *str_topics;

static int pending_traverse(Pending *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    PENDING_OBJECTS(VISIT)
#undef VISIT
    return 0;
}

static int pending_clear(Pending *self) {
#define CLEAR(f) Py_CLEAR(self->f);
    PENDING_OBJECTS(CLEAR)
#undef CLEAR
    return 0;
}

static void pending_dealloc(Pending *self) {
    PyObject_GC_UnTrack(self);
    pending_clear(self);
    PyObject_GC_Del(self);
}

/* The partitions of the request's topics (a tuple of TopicData), or -1 with an exception. */
static Py_ssize_t walked_partitions(PyObject *topics) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(topics); i++) {
        PyObject *parts = PyObject_GetAttr(PyTuple_GET_ITEM(topics, i), str_partitions);
        if (parts == NULL)
            return -1;
        Py_ssize_t n = PyTuple_Check(parts) ? PyTuple_GET_SIZE(parts) : -1;
        Py_DECREF(parts);
        if (n < 0)
            return -1; /* no exception: the caller takes the Python path */
        total += n;
    }
    return total;
}

/* 1: the entry's line was added to the sink's open chunk; 0: it was not (the Python path
   must do the entry); -1: an exception (nothing counted). */
static int fast_add(Sink *sink, Pending *e, double now, double latency) {
    PyObject *chunk_obj = sink->chunk;
    if (chunk_obj == NULL || Py_TYPE(chunk_obj) != &ChunkType)
        return 0;
    Chunk *chunk = (Chunk *)chunk_obj;
    if (!(now - chunk->opened < sink->seal_after) || !PyByteArray_Check(chunk->buf))
        return 0;
    if (e->view != sink->view || e->observe != sink->observe ||
        e->dedicated_code != sink->dedicated || sink->made_left <= 0 ||
        !PyList_Check(e->decisions) || sink->clients == NULL || !PyDict_Check(sink->clients) ||
        sink->head == NULL || !PyBytes_Check(sink->head) || sink->table == NULL ||
        !PyDict_Check(sink->table) || sink->make == NULL ||
        e->client_id == NULL || e->peer == NULL || e->request == NULL || e->frame == NULL)
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(e->decisions);
    if (sink->rows_in - sink->rows_out + n > sink->max_rows ||
        sink->bytes_in - sink->bytes_out > sink->max_bytes)
        return 0; /* the Python path counts the drop */
    PyObject *key = PyTuple_Pack(2, e->client_id, e->peer);
    if (key == NULL)
        return -1;
    PyObject *client = PyDict_GetItemWithError(sink->clients, key);
    Py_DECREF(key);
    if (client == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(client);
    PyObject *topics = PyObject_GetAttr(e->request, str_topics);
    if (topics == NULL) {
        Py_DECREF(client);
        return -1;
    }
    int ok = 0;
    if (PyTuple_Check(topics)) {
        Py_ssize_t walked = walked_partitions(topics);
        if (walked == n) { /* else: some partitions only, the Python path maps them */
            Chunk *held = (Chunk *)Py_NewRef(chunk); /* make_context runs Python */
            PyObject *buf = Py_NewRef(chunk->buf);
            Py_ssize_t start = chunk->end;
            long long made = 0;
            Py_ssize_t end = encode_entry(buf, start, sink->head, e->wall, e->req, client,
                                          latency, e->decisions, topics, e->frame,
                                          e->answer, e->version, sink->table, sink->make, &made);
            sink->made_left -= made;
            if (end >= 0 && sink->chunk == (PyObject *)held && held->buf == buf &&
                held->end == start) {
                held->end = end;
                held->rows += n;
                sink->rows_in += n;
                sink->bytes_in += end - start;
                sink->fast_entries++;
                ok = 1;
            } else if (end == ENC_ERROR) {
                ok = -1;
            }
            Py_DECREF(buf);
            Py_DECREF(held);
        } else if (walked < 0 && PyErr_Occurred()) {
            ok = -1;
        }
    }
    Py_DECREF(topics);
    Py_DECREF(client);
    return ok;
}

static PyObject *pending_call(Pending *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a pending entry takes (frame, version)");
        return NULL;
    }
    long version = PyLong_AsLong(args[1]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    if (self->ledger == NULL || Py_TYPE(self->ledger) != &SinkType || self->transform == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a pending entry without its sink or transform");
        return NULL;
    }
    Sink *sink = (Sink *)Py_NewRef(self->ledger);
    PyObject *transform = Py_NewRef(self->transform), *ret = NULL;
    PyObject *clock = PyObject_CallNoArgs(sink->clock);
    if (clock == NULL)
        goto done;
    double now = PyFloat_AsDouble(clock);
    Py_DECREF(clock);
    if (now == -1.0 && PyErr_Occurred())
        goto done;
    double latency = (now - self->sent_at) * 1000.0;
    PyObject *latency_obj = PyFloat_FromDouble(latency);
    if (latency_obj == NULL)
        goto done;
    Py_XSETREF(self->latency_ms, latency_obj);
    Py_XSETREF(self->answer, Py_NewRef(args[0]));
    self->version = (int)version;
    int added = fast_add(sink, self, now, latency);
    if (added < 0)
        PyErr_Clear(); /* the Python path does it again, and logs what fails */
    if (added != 1) {
        PyObject *r = PyObject_CallOneArg(sink->slow, (PyObject *)self);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    ret = PyObject_Vectorcall(transform, args, 2, NULL);
done:
    Py_DECREF(transform);
    Py_DECREF(sink);
    return ret;
}

#define PENDING_ARGS 12

static PyObject *pending_make(PyTypeObject *type, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != PENDING_ARGS) {
        PyErr_SetString(PyExc_TypeError,
                        "Pending(wall, req, client_id, peer, request, frame, decisions, view, "
                        "observe, dedicated_code, sink, sent_at) takes 12 arguments");
        return NULL;
    }
    double wall = PyFloat_AsDouble(args[0]);
    long long req = PyLong_AsLongLong(args[1]);
    double sent_at = PyFloat_AsDouble(args[11]);
    if (PyErr_Occurred())
        return NULL;
    Pending *self = PyObject_GC_New(Pending, type);
    if (self == NULL)
        return NULL;
    self->wall = wall;
    self->req = req;
    self->sent_at = sent_at;
    self->version = 0;
    self->client_id = Py_NewRef(args[2]);
    self->peer = Py_NewRef(args[3]);
    self->request = Py_NewRef(args[4]);
    self->frame = Py_NewRef(args[5]);
    self->decisions = Py_NewRef(args[6]);
    self->view = Py_NewRef(args[7]);
    self->observe = Py_NewRef(args[8]);
    self->dedicated_code = Py_NewRef(args[9]);
    self->ledger = Py_NewRef(args[10]);
    self->answer = Py_NewRef(Py_None);
    self->latency_ms = Py_NewRef(Py_None);
    self->transform = NULL;
    self->vectorcall = (vectorcallfunc)pending_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *pending_vectorcall_new(PyObject *type, PyObject *const *args, size_t nargsf,
                                        PyObject *kwnames) {
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_SetString(PyExc_TypeError, "Pending() takes no keyword arguments");
        return NULL;
    }
    return pending_make((PyTypeObject *)type, args, PyVectorcall_NARGS(nargsf));
}

static PyObject *pending_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Pending() takes no keyword arguments");
        return NULL;
    }
    return pending_make(type, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args));
}

static PyObject *pending_wrap(Pending *self, PyObject *transform) {
    Py_XSETREF(self->transform, Py_NewRef(transform));
    return Py_NewRef(self);
}

static PyMethodDef pending_methods[] = {
    {"wrap", (PyCFunction)pending_wrap, METH_O,
     "wrap(transform) -> self: the transform called after the entry is recorded"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef pending_members[] = {
    {"wall", T_DOUBLE, offsetof(Pending, wall), 0, "the wall clock at recording"},
    {"req", T_LONGLONG, offsetof(Pending, req), 0, "the ledger's request number"},
    {"client_id", T_OBJECT, offsetof(Pending, client_id), 0, NULL},
    {"peer", T_OBJECT, offsetof(Pending, peer), 0, NULL},
    {"request", T_OBJECT, offsetof(Pending, request), 0, "the walked ProduceRequest"},
    {"frame", T_OBJECT, offsetof(Pending, frame), 0, "the request frame (immutable)"},
    {"decisions", T_OBJECT, offsetof(Pending, decisions), 0, "the forwarded decisions"},
    {"view", T_OBJECT, offsetof(Pending, view), 0, NULL},
    {"observe", T_OBJECT, offsetof(Pending, observe), 0, NULL},
    {"dedicated_code", T_OBJECT, offsetof(Pending, dedicated_code), 0, NULL},
    {"answer", T_OBJECT, offsetof(Pending, answer), 0, "the broker's answer, or None"},
    {"version", T_INT, offsetof(Pending, version), 0, "the answer's version"},
    {"latency_ms", T_OBJECT, offsetof(Pending, latency_ms), 0, NULL},
    {"ledger", T_OBJECT, offsetof(Pending, ledger), READONLY, "the Sink"},
    {"sent_at", T_DOUBLE, offsetof(Pending, sent_at), 0, "the clock when sent upstream"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject PendingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "proxy._ledger_native.Pending",
    .tp_doc = "Pending(wall, req, client_id, peer, request, frame, decisions, view, observe, "
              "dedicated_code, sink, sent_at): a forwarded entry; call it with the "
              "broker's answer (frame, version) once wrap(transform) was called.",
    .tp_basicsize = sizeof(Pending),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Pending, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall = pending_vectorcall_new,
    .tp_new = pending_new,
    .tp_dealloc = (destructor)pending_dealloc,
    .tp_traverse = (traverseproc)pending_traverse,
    .tp_clear = (inquiry)pending_clear,
    .tp_members = pending_members,
    .tp_methods = pending_methods,
};

static PyMethodDef methods[] = {
    {"rows", (PyCFunction)(void (*)(void))rows, METH_FASTCALL,
     "rows(out, pos, head, wall, req, client, latency_ms, decisions, spans, frame, answer, "
     "version, contexts, make_context) -> int | None: one ledger entry's JSON line written "
     "into the bytearray out from pos; the new end, -1 when out has no room for them, or "
     "None to use the Python encoder."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ledger_native",
    "The decision ledger's row encoder for the usual case (see proxy.ledger_rows).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ledger_native(void) {
    if (str_partitions == NULL)
        str_partitions = PyUnicode_InternFromString("partitions");
    if (str_records == NULL)
        str_records = PyUnicode_InternFromString("records");
    if (str_topics == NULL)
        str_topics = PyUnicode_InternFromString("topics");
    if (str_partitions == NULL || str_records == NULL || str_topics == NULL)
        return NULL;
    if (PyType_Ready(&ChunkType) < 0 || PyType_Ready(&SinkType) < 0 ||
        PyType_Ready(&PendingType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddType(m, &ChunkType) < 0 || PyModule_AddType(m, &SinkType) < 0 ||
        PyModule_AddType(m, &PendingType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
