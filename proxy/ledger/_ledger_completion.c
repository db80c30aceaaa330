/*
 * proxy._ledger_native, its second half: the completion fast path, the usual
 * forwarded entry taken from the broker's answer to its line in the open chunk
 * without running Python (the first half, _ledger_native.c, is the encoder).
 *
 * Chunk: an encoded-rows buffer (proxy.ledger_chunks): buf, end, rows, opened.
 * Sink: what the fast path needs of the ledger, one per ledger: the open chunk
 * it may add to (None: every entry takes the Python path, ``slow``), the
 * queue's counters and bounds, and the event loop encoder's current context
 * cache; the Python side keeps them current (proxy.ledger,
 * proxy.ledger_chunks, RowFormatter.attach).
 * Pending: one forwarded entry (the attributes of
 * proxy.ledger_rows.ProduceEntry, plus the sink, the time it went upstream
 * and the wrapped transform). Made when the sink knows the entry's view and
 * client, it encodes the line at once but for the answer (``prepared``) and
 * lets go of the request's objects (see prepare()). Calling it with the
 * broker's answer records the answer and the latency, adds the entry's line
 * to the open chunk when the usual case holds and everything fits, otherwise
 * calls ``sink.slow(entry)``, then returns ``transform(frame, version)``.
 *
 * Invariants: the fast path never drops, counts or logs anything: whatever it
 * does not do, the Python path does from the start (an exception inside it is
 * cleared and the Python path repeats the work, and reports what fails); it
 * runs on the event loop's thread, with the GIL, like the Python path.
 */
#include "_ledger_native.h"

#include <math.h>
#include <stddef.h>
#include <structmember.h>

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
    long long made_left, prepared_entries;
    PyObject *scratch; /* a bytearray lines are prepared in (not shown to Python) */
} Sink;

static PyTypeObject SinkType;

#define SINK_OBJECTS(X) X(slow) X(clock) X(chunk) X(head) X(clients) X(view) X(observe) \
    X(dedicated) X(table) X(make)

static int sink_traverse(Sink *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    SINK_OBJECTS(VISIT)
#undef VISIT
    Py_VISIT(self->scratch);
    return 0;
}

static int sink_clear(Sink *self) {
#define CLEAR(f) Py_CLEAR(self->f);
    SINK_OBJECTS(CLEAR)
#undef CLEAR
    Py_CLEAR(self->scratch);
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
    {"prepared_entries", T_LONGLONG, offsetof(Sink, prepared_entries), 0,
     "entries encoded, but for the answer, when they were recorded"},
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
    Py_ssize_t rows;    /* the entry's partitions */
    PyObject *prepared; /* the line without the answer (bytes), or NULL */
    rg_prep_t prep;     /* where the answer goes in it */
} Pending;

#define PENDING_OBJECTS(X) X(client_id) X(peer) X(request) X(frame) X(decisions) X(view) \
    X(observe) X(dedicated_code) X(answer) X(latency_ms) X(ledger) X(transform)

static PyTypeObject PendingType;
static PyObject *str_topics; /* interned by rg_add_completion_types */

static int pending_traverse(Pending *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    PENDING_OBJECTS(VISIT)
#undef VISIT
    return 0;
}

static void prep_release(rg_prep_t *prep) {
    for (Py_ssize_t i = 0; i < prep->n; i++)
        Py_CLEAR(prep->holes[i].key);
    prep->n = 0;
}

static void drop_prepared(Pending *self) {
    Py_CLEAR(self->prepared);
    prep_release(&self->prep);
    PyMem_Free(self->prep.holes);
    self->prep.holes = NULL;
    self->prep.cap = 0;
}

static int pending_clear(Pending *self) {
#define CLEAR(f) Py_CLEAR(self->f);
    PENDING_OBJECTS(CLEAR)
#undef CLEAR
    drop_prepared(self);
    return 0;
}

static void pending_dealloc(Pending *self) {
    PyObject_GC_UnTrack(self);
    pending_clear(self);
    PyObject_GC_Del(self);
}

/* The entry's view is the one the published contexts were made for, and its client is
   known: a new reference to the client's fragment; else NULL (with an exception, or
   without: the Python path does the entry). */
static PyObject *usual_client(Sink *sink, Pending *e) {
    if (e->view != sink->view || e->observe != sink->observe ||
        e->dedicated_code != sink->dedicated || sink->made_left <= 0 ||
        e->decisions == NULL || !PyList_Check(e->decisions) || sink->clients == NULL ||
        !PyDict_Check(sink->clients) || sink->head == NULL || !PyBytes_Check(sink->head) ||
        sink->table == NULL || !PyDict_Check(sink->table) || sink->make == NULL ||
        e->client_id == NULL || e->peer == NULL || e->request == NULL || e->frame == NULL)
        return NULL;
    PyObject *key = PyTuple_Pack(2, e->client_id, e->peer);
    if (key == NULL)
        return NULL;
    PyObject *client = PyDict_GetItemWithError(sink->clients, key);
    Py_DECREF(key);
    return Py_XNewRef(client);
}

/* The request's TopicData tuple when its partitions are exactly the entry's decisions (a
   new reference), else NULL (with an exception, or without: the Python path maps them). */
static PyObject *walked_topics(Pending *e) {
    PyObject *topics = PyObject_GetAttr(e->request, str_topics);
    if (topics == NULL)
        return NULL;
    if (PyTuple_Check(topics) && rg_walked_partitions(topics) == PyList_GET_SIZE(e->decisions))
        return topics;
    Py_DECREF(topics);
    return NULL;
}

/* Encode the entry, but for the broker's answer, into e->prepared when it is recorded,
   and let go of the request's objects (its walk, frame and decisions): held for a
   round trip they cost about 5 % of the proxy's CPU at 50 partitions per request
   (measured with both proxies loaded at once; most likely the memory the next
   requests got was no longer warm), more than encoding now costs. Nothing when it
   cannot (the entry is then encoded whole when the answer comes, by the C path or
   the Python one); never an exception. */
static void prepare(Pending *e, Sink *sink) {
    PyObject *client = usual_client(sink, e), *topics = NULL;
    if (client == NULL || e->rows == 0 || (topics = walked_topics(e)) == NULL)
        goto done;
    e->prep.holes = PyMem_Calloc((size_t)e->rows, sizeof(rg_hole_t));
    if (e->prep.holes == NULL)
        goto done;
    e->prep.cap = e->rows;
    if (sink->scratch == NULL &&
        (sink->scratch = PyByteArray_FromStringAndSize(NULL, 1 << 16)) == NULL)
        goto done;
    for (;;) {
        long long made = 0;
        Py_ssize_t end = rg_encode_entry(sink->scratch, 0, sink->head, e->wall, e->req, client,
                                         NAN, e->decisions, topics, e->frame, Py_None, 0,
                                         sink->table, sink->make, &made, &e->prep);
        sink->made_left -= made;
        if (end == ENC_FULL) {
            prep_release(&e->prep);
            if (PyByteArray_Resize(sink->scratch, PyByteArray_GET_SIZE(sink->scratch) * 4) < 0)
                break;
            continue;
        }
        if (end >= 0 && e->prep.n == e->rows)
            e->prepared = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(sink->scratch), end);
        break;
    }
done:
    PyErr_Clear();
    Py_XDECREF(topics);
    Py_XDECREF(client);
    if (e->prepared == NULL) {
        drop_prepared(e);
        return;
    }
    sink->prepared_entries++;
    Py_SETREF(e->request, Py_NewRef(Py_None));
    Py_SETREF(e->frame, Py_NewRef(Py_None));
    Py_SETREF(e->decisions, Py_NewRef(Py_None));
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
    Py_ssize_t n = e->rows;
    if (sink->rows_in - sink->rows_out + n > sink->max_rows ||
        sink->bytes_in - sink->bytes_out > sink->max_bytes)
        return 0; /* the Python path counts the drop */
    Py_ssize_t start = chunk->end, end;
    if (e->prepared != NULL) {
        end = rg_finish_prepared(PyBytes_AS_STRING(e->prepared), PyBytes_GET_SIZE(e->prepared),
                                 &e->prep, e->answer, e->version, latency, chunk->buf, start);
    } else {
        PyObject *client = usual_client(sink, e), *topics = NULL;
        if (client == NULL || (topics = walked_topics(e)) == NULL) {
            Py_XDECREF(client);
            return PyErr_Occurred() ? -1 : 0;
        }
        Chunk *held = (Chunk *)Py_NewRef(chunk); /* make_context runs Python */
        PyObject *buf = Py_NewRef(chunk->buf);
        long long made = 0;
        end = rg_encode_entry(buf, start, sink->head, e->wall, e->req, client, latency,
                              e->decisions, topics, e->frame, e->answer, e->version,
                              sink->table, sink->make, &made, NULL);
        sink->made_left -= made;
        if (end >= 0 && (sink->chunk != (PyObject *)held || held->buf != buf ||
                         held->end != start))
            end = ENC_DECLINE; /* (cannot happen: make_context does not seal chunks) */
        Py_DECREF(buf);
        Py_DECREF(held);
        Py_DECREF(topics);
        Py_DECREF(client);
    }
    if (end == ENC_ERROR)
        return -1;
    if (end < 0)
        return 0;
    chunk->end = end;
    chunk->rows += n;
    sink->rows_in += n;
    sink->bytes_in += end - start;
    sink->fast_entries++;
    return 1;
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
    self->rows = PyList_Check(args[6]) ? PyList_GET_SIZE(args[6]) : PyObject_Length(args[6]);
    self->prepared = NULL;
    self->prep = (rg_prep_t){0, 0, 0, NULL, 0};
    PyObject_GC_Track(self);
    if (self->rows < 0) {
        Py_DECREF(self);
        return NULL;
    }
    if (Py_TYPE(self->ledger) == &SinkType)
        prepare(self, (Sink *)self->ledger);
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

/* holes() -> [(at, topic key, partition), ...]: where the answer goes in ``prepared``. */
static PyObject *pending_holes(Pending *self, PyObject *unused) {
    (void)unused;
    PyObject *out = PyList_New(self->prep.n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->prep.n; i++) {
        const rg_hole_t *h = &self->prep.holes[i];
        PyObject *item = Py_BuildValue("(nOl)", h->at, h->key, h->index);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

/* finish_into(out, pos) -> int | None: the prepared line with the answer into the
   bytearray out from pos (the new end; -1: no room; None: the answer is not the usual
   one, the Python finisher does it). */
static PyObject *pending_finish_into(Pending *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "finish_into(out, pos)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    double latency = self->latency_ms == NULL || self->latency_ms == Py_None
                         ? NAN : PyFloat_AsDouble(self->latency_ms);
    if (latency == -1.0 && PyErr_Occurred())
        return NULL;
    if (self->prepared == NULL || self->answer == NULL)
        Py_RETURN_NONE;
    Py_ssize_t end = rg_finish_prepared(PyBytes_AS_STRING(self->prepared),
                                        PyBytes_GET_SIZE(self->prepared), &self->prep,
                                        self->answer, self->version, latency, args[0], pos);
    if (end == ENC_ERROR)
        return NULL;
    if (end == ENC_DECLINE)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(end);
}

static PyMethodDef pending_methods[] = {
    {"wrap", (PyCFunction)pending_wrap, METH_O,
     "wrap(transform) -> self: the transform called after the entry is recorded"},
    {"holes", (PyCFunction)pending_holes, METH_NOARGS,
     "holes() -> [(at, topic key, partition)]: where the answer goes in prepared"},
    {"finish_into", (PyCFunction)(void (*)(void))pending_finish_into, METH_FASTCALL,
     "finish_into(out, pos) -> int | None: the prepared line with the answer, into out"},
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
    {"rows", T_PYSSIZET, offsetof(Pending, rows), READONLY, "the entry's partitions"},
    {"prepared", T_OBJECT, offsetof(Pending, prepared), READONLY,
     "the line but for the answer (bytes; request, frame and decisions are then None), "
     "or None"},
    {"latency_at", T_PYSSIZET, offsetof(Pending, prep) + offsetof(rg_prep_t, latency_at),
     READONLY, "where the latency goes in prepared"},
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

int rg_add_completion_types(PyObject *module) {
    if (str_topics == NULL && (str_topics = PyUnicode_InternFromString("topics")) == NULL)
        return -1;
    if (PyType_Ready(&ChunkType) < 0 || PyType_Ready(&SinkType) < 0 ||
        PyType_Ready(&PendingType) < 0)
        return -1;
    if (PyModule_AddType(module, &ChunkType) < 0 || PyModule_AddType(module, &SinkType) < 0 ||
        PyModule_AddType(module, &PendingType) < 0)
        return -1;
    return 0;
}
