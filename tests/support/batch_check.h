/* Checks of batch contexts (vkg_batch_*) shared by test_batch and test_batch_scale: sequences
 * run alone through a plain context, then on a schedule (joining and leaving) through one batch
 * context, each sequence's logits at every step compared with its run alone: bit for bit on the
 * CPU; on Vulkan within attention's conformance threshold (NMSE 5e-4), same argmax unless the
 * two best logits are within 1e-3. */
#ifndef VKG_TEST_BATCH_CHECK_H
#define VKG_TEST_BATCH_CHECK_H

#include "vkgraph_model.h"

enum { BATCH_MAX_STEPS = 12, BATCH_MAX_SEQ = 16 };

typedef struct batch_check {
    vkg_model *model;
    int cpu;                  /* bit-identical logits required */
    int V, n_ctx;             /* n_ctx of every context and of the batch context */
    int prefill_chunk;        /* the batch context's (0: its default); the sequences alone
                                 are fed their prompts in the same chunks */
} batch_check;

/* A sequence of a schedule: its prompt, the step it joins at, and how many tokens it then decodes
 * (the greedy tokens of its run alone) before it leaves. */
typedef struct batch_seq {
    int32_t prompt[640];
    int n_prompt, join, steps;
    float *alone;                     /* [steps + 1, V]: logits after the prompt, then each token */
    int32_t tokens[BATCH_MAX_STEPS];  /* the greedy tokens of the sequence alone                  */
    int watch;                        /* the batch watches its prompt (vkg_batch_seq_watch_prompt):
                                         every row of its passes compared with the rows alone    */
    float *prompt_rows;               /* [n_prompt, V]: with watch, the rows alone                */
    float *watched;                   /* [n_prompt, V]: with watch, the rows the batch gave       */
    int n_watched, n_vocab;
} batch_seq;

int batch_argmax(const float *x, int n);
/* A prompt of n ids spread over the vocabulary, different for each i. */
void batch_make_prompt(batch_seq *p, int i, int n, int V);
/* The sequence alone: a plain context, the prompt in the batch context's chunks, then greedy
 * tokens. */
void batch_run_alone(const batch_check *c, batch_seq *p);
/* got against want (the sequence alone), as the top of this file says. */
void batch_compare(const batch_check *c, const float *got, const float *want, int seq, int step);
/* Runs every sequence alone, then the schedule through a batch context of n_seq slots, claiming
 * a slot as each joins and removing it as it leaves; frees each p->alone.  Returns how many
 * times a sequence was seen after a step with its prompt part-way through its chunks. */
int batch_run_schedule(const batch_check *c, batch_seq *plans, int n, int n_seq);

#endif
