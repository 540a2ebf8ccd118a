#!/usr/bin/env python3
# Writes a synthetic torch memory snapshot pickle shaped like _dump_snapshot()'s output, for
# timing the native reader on large files (see fuzz/README.md). Not a test fixture: the
# output is far over the 2 MB limit for committed files.
import argparse
import gzip
import pickle
import random


def make_snapshot(num_entries, frames_per_entry, seed):
    rng = random.Random(seed)
    base = 0x7F0000000000
    segments = []
    address = base
    for s in range(300):
        total = rng.choice([2, 20, 64, 200]) << 20
        blocks, offset = [], 0
        while offset < total:
            size = min(total - offset, rng.choice([512, 1 << 20, 4 << 20, 16 << 20]))
            state = rng.choice(['active_allocated', 'inactive', 'active_pending_free'])
            blocks.append({'address': address + offset, 'size': size,
                           'requested_size': size - rng.randrange(0, 512), 'state': state,
                           'frames': []})
            offset += size
        segments.append({'device': 0, 'address': address, 'total_size': total,
                         'allocated_size': 0, 'active_size': 0, 'requested_size': 0,
                         'stream': 0, 'segment_type': 'small' if total == 2 << 20 else 'large',
                         'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [],
                         'blocks': blocks})
        address += total
    actions = ['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free']
    trace = []
    for i in range(num_entries):
        # Fresh strings per frame, so the pickler cannot share them through the memo: the
        # worst case for a reader, and about 1 KB per entry like a deep Python stack.
        frames = [{'filename': f'/opt/conda/lib/python3.11/site-packages/torch/nn/modules/m{i % 977}_{j}.py',
                   'line': rng.randrange(1, 5000), 'name': f'forward_{i % 131}_{j}'}
                  for j in range(frames_per_entry)]
        trace.append({'action': actions[i % len(actions)], 'addr': base + rng.randrange(0, 1 << 30),
                      'size': rng.randrange(1, 1 << 28), 'stream': 0,
                      'time_us': 1748732496203737 + i, 'frames': frames,
                      'compile_context': 'N/A', 'user_metadata': ''})
    settings = {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:False', 'max_split_size': -1,
                'expandable_segments': False}
    return {'segments': segments, 'device_traces': [trace], 'allocator_settings': settings}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('out', help='output path; a second copy ending in .gz is also written')
    parser.add_argument('--entries', type=int, default=200_000)
    parser.add_argument('--frames', type=int, default=10)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    data = pickle.dumps(make_snapshot(args.entries, args.frames, args.seed), protocol=4)
    with open(args.out, 'wb') as f:
        f.write(data)
    with gzip.open(args.out + '.gz', 'wb', compresslevel=6) as f:
        f.write(data)
    print(f'{args.out}: {len(data) / 1e6:.1f} MB pickle, {args.entries} trace entries')


if __name__ == '__main__':
    main()
