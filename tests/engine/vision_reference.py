"""Reference check: evald's image preprocessing against transformers' MiniMaxM3VLImageProcessor.

    vision_reference.py EVALD SCRATCH_DIR

Random RGB images of random sizes and aspect ratios (and a few chosen ones: a size
smart_resize keeps, one it enlarges, one it shrinks hard, a long strip), written as PNG
(lossless, so both sides start from the same pixels), go through `evald engine
preprocess --out` and through transformers' processor (torchvision backend). The grid
must be equal, the pixel values within one 8-bit step (two on the long strip, see
there) and equal where the size is kept; smart_resize must equal transformers' on 10,000 random sizes (errors
included). Then the tower, end-to-end logits and greedy generation with images, and videos (frames
sampled, resized and paired, segments, timestamps and placeholders, tower rows, logits). Prints the figures; exits 1 on a difference, 77 (skip) without transformers,
torchvision or Pillow.
"""
import json
import os
import random
import subprocess
import sys

try:
    import numpy as np
    import torch
    from PIL import Image
    from transformers.models.minimax_m3_vl.image_processing_minimax_m3_vl import (MiniMaxM3VLImageProcessor,
                                                                                  smart_resize)
    import torchvision  # noqa: F401  (the processor's backend)
except ImportError as e:
    print(f"SKIP: {e} (bash scripts/reference-env.sh)")
    sys.exit(77)

EVALD, SCRATCH = sys.argv[1], sys.argv[2]
STD = np.array([0.26862954, 0.26130258, 0.27577711]) * 255  # one 8-bit step in normalised units is 1/STD


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    proc = MiniMaxM3VLImageProcessor()
    rnd = random.Random(3)
    sizes = [(224, 280), (20, 30), (1000, 700), (12, 1500), (448, 448)]
    sizes += [(rnd.randrange(8, 1400), rnd.randrange(8, 1400)) for _ in range(25)]
    bad, worst, exact_ok = 0, 0.0, True
    for k, (h, w) in enumerate(sizes):
        if max(h, w) / min(h, w) > 200:
            continue
        arr = np.random.RandomState(k).randint(0, 256, (h, w, 3), dtype=np.uint8)
        if k % 3 == 1:  # smooth images too: gradients with a little noise
            yy, xx = np.mgrid[0:h, 0:w]
            arr = ((np.stack([xx * 255 / max(w - 1, 1), yy * 255 / max(h - 1, 1), (xx + yy) % 256], -1)
                    + np.random.RandomState(k).randint(-8, 9, (h, w, 3))).clip(0, 255).astype(np.uint8))
        path, raw = os.path.join(SCRATCH, "im%d.png" % k), os.path.join(SCRATCH, "im%d.f32" % k)
        Image.fromarray(arr).save(path)
        out = subprocess.run([EVALD, "engine", "preprocess", "--image", path, "--out", raw, "--json"], check=True,
                             capture_output=True, text=True).stdout
        got_meta = json.loads(out)
        want = proc(images=Image.open(path), return_tensors="pt")
        wp, grid = want["pixel_values"].numpy(), want["image_grid_thw"][0].tolist()
        gp = np.fromfile(raw, dtype="<f4").reshape(wp.shape) if got_meta["grid_thw"] == grid else None
        if gp is None:
            print("%4d x %-4d grid %s, transformers %s  FAIL" % (w, h, got_meta["grid_thw"], grid))
            bad += 1
            continue
        # per value, the difference in 8-bit steps: channel of a value is its index // (2 * 14 * 14)
        ch = (np.arange(wp.shape[1]) // (wp.shape[1] // 3))
        steps = np.abs(gp - wp) * STD[ch][None, :]
        m = float(steps.max())
        worst = max(worst, m)
        kept = got_meta["resized_width"] == w and got_meta["resized_height"] == h
        if kept and m > 1e-3:
            exact_ok = False
        # the long strip (1,500 wide shrunk 2.3x, 12 high grown to 28) is the one case seen to differ by
        # two steps: torch's fixed-point horizontal pass rounds a few sums up where evald's lands a
        # unit below (their int16 weights sum differently there); every random size is exact
        limit = 2.0 if (h, w) == (12, 1500) else 1.0
        ok = m <= limit + 1e-3 and (not kept or m <= 1e-3)
        bad += not ok
        print("%4d x %-4d -> %4d x %-4d grid %-13s max difference %.3f 8-bit steps, %.2f%% of values differ%s%s" % (
            w, h, got_meta["resized_width"], got_meta["resized_height"], grid, m,
            100.0 * float((steps > 1e-3).mean()), " (size kept)" if kept else "", "" if ok else "  FAIL"))
    # smart_resize on 10,000 random sizes
    lines, want = [], []
    for _ in range(10000):
        h, w = rnd.randrange(1, 30000), rnd.randrange(1, 30000)
        if rnd.random() < 0.5:
            h, w = rnd.randrange(1, 3000), rnd.randrange(1, 3000)
        lines.append("%d %d" % (h, w))
        try:
            want.append("%d %d" % smart_resize(h, w, factor=28, min_pixels=3136, max_pixels=451584))
        except ValueError:
            want.append("error")
    sz = os.path.join(SCRATCH, "sizes.txt")
    with open(sz, "w") as f:
        f.write("\n".join(lines) + "\n")
    got = subprocess.run([EVALD, "engine", "preprocess", "--sizes", sz], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    got = ["error" if g.startswith("error") else g for g in got]
    same = sum(a == b for a, b in zip(got, want))
    print("smart_resize: %d/%d sizes equal to transformers'" % (same, len(want)))
    bad += same != len(want)
    print("pixel values: worst %.3f 8-bit steps; exact where the size is kept: %s" % (worst, exact_ok))
    bad += tower()
    return 1 if bad else 0


def tower():
    """The vision tower and projector of a random multimodal M3 (`mkmodel --arch minimax_m3_vl`): loaded
    by transformers with no tensor missing, and the engine's embedding rows for an image equal to
    transformers' get_image_features on the same pixel values."""
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import MiniMaxM3SparseForConditionalGeneration
    d = os.path.join(SCRATCH, "m3vl")
    subprocess.run([EVALD, "engine", "mkmodel", "--arch", "minimax_m3_vl", "--out", d, "--seed", "7"], check=True,
                   capture_output=True)
    model, info = MiniMaxM3SparseForConditionalGeneration.from_pretrained(d, torch_dtype=torch.float32,
                                                                          output_loading_info=True)
    model.eval()
    bad = 0
    if info["missing_keys"]:
        print("tower: transformers finds tensors missing: %s  FAIL" % sorted(info["missing_keys"])[:5])
        bad += 1
    for k, (h, w) in enumerate([(56, 84), (140, 112), (300, 200)]):
        arr = np.random.RandomState(100 + k).randint(0, 256, (h, w, 3), dtype=np.uint8)
        path = os.path.join(SCRATCH, "tower%d.png" % k)
        Image.fromarray(arr).save(path)
        pix, emb = path + ".pix", path + ".emb"
        meta = json.loads(subprocess.run([EVALD, "engine", "preprocess", "--image", path, "--model", d, "--out", pix,
                                          "--embed-out", emb, "--json"], check=True, capture_output=True,
                                         text=True).stdout)
        grid = torch.tensor([meta["grid_thw"]])
        pv = torch.from_numpy(np.fromfile(pix, dtype="<f4").reshape(meta["patches"], meta["patch_dim"]))
        with torch.no_grad():
            want = model.model.get_image_features(pv, grid).pooler_output[0]
        got = torch.from_numpy(np.fromfile(emb, dtype="<f4").reshape(want.shape))
        rel = float((got - want).abs().max() / want.abs().max())
        ok = rel < 1e-4
        bad += not ok
        print("tower: %d x %d image, %d patches -> %d rows: max relative difference %.2e%s" % (
            w, h, meta["patches"], want.shape[0], rel, "" if ok else "  FAIL"))
        # end to end: text, the image's placeholders, text; the decoder's logits with the rows in place
        img_id, n_img = model.config.image_token_id, want.shape[0]
        ids = [5, 17, 9] + [img_id] * n_img + [33, 2, 8]
        with torch.no_grad():
            lw = model(input_ids=torch.tensor([ids]), pixel_values=pv, image_grid_thw=grid).logits[0]
        out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, ids)),
                              "--image", path, "--json"], check=True, capture_output=True, text=True).stdout
        lg = torch.tensor(json.loads(out))
        rel = float((lg - lw).abs().max() / lw.abs().max())
        agree = int((lg.argmax(-1) == lw.argmax(-1)).sum())
        ok = rel < 1e-4 and agree == len(ids)
        bad += not ok
        print("end to end: %d tokens with %d image rows: max relative logit difference %.2e, argmax %d/%d%s" % (
            len(ids), n_img, rel, agree, len(ids), "" if ok else "  FAIL"))
    bad += processor_and_generate(d, model)
    bad += video(d, model)
    return bad


def video(d, model):
    """Videos: frames in a folder through `evald engine preprocess --video` against
    MiniMaxM3VLVideoProcessor (do_sample_frames and do_resize on, the frames' rate in VideoMetadata):
    the sampled indices, pixel values within one 8-bit step, the grid split into segments of 4
    temporal patches, the placeholder text (timestamps, start, video tokens, end) equal to the
    processor's expansion token for token, the tower's rows equal to get_video_features, and the
    decoder's logits with those rows in the video placeholders."""
    from transformers import AutoTokenizer
    from transformers.video_utils import VideoMetadata
    from transformers.models.minimax_m3_vl.processing_minimax_m3_vl import MiniMaxM3VLProcessor
    from transformers.models.minimax_m3_vl.video_processing_minimax_m3_vl import MiniMaxM3VLVideoProcessor
    vp = MiniMaxM3VLVideoProcessor()
    tok = AutoTokenizer.from_pretrained(d)
    proc = MiniMaxM3VLProcessor(image_processor=MiniMaxM3VLImageProcessor(), tokenizer=tok, video_processor=vp)
    bad = 0
    # (frames, fps, height, width): resized or kept, odd frame counts (the last repeated), > 4 temporal patches
    for k, (n, fps, h, w) in enumerate([(11, 3.0, 70, 100), (40, 2.5, 56, 84), (9, 1.0, 120, 90)]):
        folder = os.path.join(SCRATCH, "video%d" % k)
        os.makedirs(folder, exist_ok=True)
        frames = np.random.RandomState(300 + k).randint(0, 256, (n, h, w, 3), dtype=np.uint8)
        for i in range(n):
            Image.fromarray(frames[i]).save(os.path.join(folder, "f%d.png" % i))
        pix, emb, txt = folder + ".pix", folder + ".emb", folder + ".txt"
        meta = json.loads(subprocess.run([EVALD, "engine", "preprocess", "--video", folder, "--fps", str(fps),
                                          "--model", d, "--out", pix, "--embed-out", emb, "--text-out", txt, "--json"],
                                         check=True, capture_output=True, text=True).stdout)
        md = VideoMetadata(total_num_frames=n, fps=fps, width=w, height=h)
        want = vp(videos=[torch.from_numpy(frames).permute(0, 3, 1, 2)], video_metadata=[md], do_sample_frames=True,
                  do_resize=True, return_metadata=True, return_tensors="pt")
        wmeta = want["video_metadata"][0]
        wp = want["pixel_values_videos"].numpy()
        grids = want["video_grid_thw"].tolist()
        ok_idx = list(wmeta.frames_indices) == meta["frames_indices"]
        ok_grid = meta["grid_thw"][0] == sum(g[0] for g in grids) and [g[1:] for g in grids][0] == meta["grid_thw"][1:]
        ok_seg = len(grids) == meta["segments"]
        gp = np.fromfile(pix, dtype="<f4").reshape(wp.shape) if ok_grid else None
        # largest difference in 8-bit steps (bounded with the largest std)
        steps = float(np.abs(gp - wp).max() * STD.max()) if gp is not None else 99.0
        # the placeholder text: the processor's expansion of one video marker, as token ids
        inp = proc(text=["A ]<]video[>[ B"], videos=[torch.from_numpy(frames).permute(0, 3, 1, 2)],
                   videos_kwargs={"video_metadata": [md], "do_sample_frames": True, "do_resize": True},
                   return_tensors="pt")
        with open(txt) as f:
            ours = tok("A " + f.read() + " B")["input_ids"]
        ok_text = ours == inp["input_ids"][0].tolist()
        # the tower, segment by segment
        pv, gt = want["pixel_values_videos"], want["video_grid_thw"]
        with torch.no_grad():
            wrows = torch.cat(model.model.get_video_features(pv, gt).pooler_output, 0)
        grows = torch.from_numpy(np.fromfile(emb, dtype="<f4").reshape(wrows.shape)) if np.fromfile(
            emb, dtype="<f4").size == wrows.numel() else None
        rel = float((grows - wrows).abs().max() / wrows.abs().max()) if grows is not None else 99.0
        # end to end: the processor's ids, the decoder with the rows in place
        ids = inp["input_ids"][0].tolist()
        with torch.no_grad():
            lw = model(input_ids=inp["input_ids"], pixel_values_videos=pv, video_grid_thw=gt).logits[0]
        out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, ids)),
                              "--embeds", emb, "--json"], check=True, capture_output=True, text=True).stdout
        lg = torch.tensor(json.loads(out))
        lrel = float((lg - lw).abs().max() / lw.abs().max())
        agree = int((lg.argmax(-1) == lw.argmax(-1)).sum())
        ok = ok_idx and ok_grid and ok_seg and steps <= 1.0001 and ok_text and rel < 1e-4 and lrel < 1e-4 and \
            agree == len(ids)
        bad += not ok
        print("video %d frames at %g fps, %d x %d: sampled %s (%s), grid %s in %d segments (transformers %s), pixels "
              "within %.2f steps, placeholder text %s (%d tokens), tower %.2e, logits %.2e, argmax %d/%d%s" % (
                  n, fps, w, h, meta["frames_indices"], "equal" if ok_idx else "transformers %s" % wmeta.frames_indices,
                  meta["grid_thw"], meta["segments"], grids, steps, "equal" if ok_text else "DIFFERENT", len(ids), rel,
                  lrel, agree, len(ids), "" if ok else "  FAIL"))
    return bad


def processor_and_generate(d, model):
    """A prompt with M3's image marker, through transformers' MiniMaxM3VLProcessor (marker expanded
    into start, image tokens, end) and model.generate, against `evald engine generate --image`:
    the same greedy tokens."""
    from transformers import AutoTokenizer
    from transformers.models.minimax_m3_vl.processing_minimax_m3_vl import MiniMaxM3VLProcessor
    from transformers.models.minimax_m3_vl.video_processing_minimax_m3_vl import MiniMaxM3VLVideoProcessor
    proc = MiniMaxM3VLProcessor(image_processor=MiniMaxM3VLImageProcessor(), tokenizer=AutoTokenizer.from_pretrained(d),
                                video_processor=MiniMaxM3VLVideoProcessor())
    bad = 0
    for k, (h, w) in enumerate([(60, 90), (150, 120)]):
        path = os.path.join(SCRATCH, "gen%d.png" % k)
        Image.fromarray(np.random.RandomState(200 + k).randint(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        text = "Look at ]<]image[>[ and say what it is."
        inp = proc(text=[text], images=[Image.open(path)], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inp, max_new_tokens=8, do_sample=False)
        want = out[0, inp["input_ids"].shape[1]:].tolist()
        got = json.loads(subprocess.run([EVALD, "engine", "generate", "--model", d, "--prompt", text, "--image", path,
                                         "--max-tokens", "8", "--json"], check=True, capture_output=True,
                                        text=True).stdout)
        ok = got["tokens"] == want[:len(got["tokens"])] and got["prompt_tokens"] == inp["input_ids"].shape[1]
        bad += not ok
        print("generate with an image (%d x %d): prompt %d tokens (transformers %d), greedy %s vs %s%s" % (
            w, h, got["prompt_tokens"], inp["input_ids"].shape[1], got["tokens"], want, "" if ok else "  FAIL"))
    return bad


if __name__ == "__main__":
    sys.exit(main())
