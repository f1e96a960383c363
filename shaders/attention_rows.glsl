// How the fused attention numbers its query rows (params/attention.h), shared by attention.glsl,
// which writes a row's output (or with CHUNK_KEYS its chunks' states at the row's number), and
// attention_merge.comp, which folds those states into the same output row.  The rows of a batch
// entry (b0, b1) are one run of T; with grouped-query attention the rows of one b0 are one run
// of batch1 * T (b1 major), so that a key/value head's query heads are computed together.
#ifndef VKG_ATTENTION_ROWS_GLSL
#define VKG_ATTENTION_ROWS_GLSL

// Rows sharing keys and values: a run.
uint vkg_attention_run() { return VKG_ATTENTION_GROUPED(p) ? p.batch1 * p.T : p.T; }
// Runs in the step.
uint vkg_attention_runs() { return VKG_ATTENTION_GROUPED(p) ? p.batch0 : p.batch0 * p.batch1; }
// Row tr of run bb as its batch entry (b0, b1) and query row t.
void vkg_attention_row(uint bb, uint tr, out uint b0, out uint b1, out uint t) {
    bool grouped = VKG_ATTENTION_GROUPED(p);
    t = grouped ? tr % p.T : tr;
    b1 = grouped ? tr / p.T : bb % p.batch1;
    b0 = grouped ? bb : bb / p.batch1;
}

#endif
