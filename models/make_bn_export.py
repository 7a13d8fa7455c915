#!/usr/bin/env python3
"""Writes models/mobilenet_v2_bn.onnx: a reduced-width torchvision
MobileNetV2 (width_mult 0.25, 10 classes) exported by torch.onnx's
TorchScript exporter with every BatchNormalization kept as its own node
(the committed exports in models/exported have them folded into the Convs
by the exporter), for the fold-batchnorm pass and its test
(tests/unit/passes_rewrite_test.cpp, FoldsEveryBatchNormOfATorchvisionExport).

The batch-norm statistics and affine parameters are drawn at random (seeded)
so that folding them changes the weights visibly. Not part of `make test`:
it needs torch and torchvision (Debian: apt-get install python3-torch
python3-torchvision); the .onnx it writes is committed.

    /usr/bin/python3 models/make_bn_export.py [--out models/mobilenet_v2_bn.onnx]
"""

import argparse
import os

import torch
import torchvision


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(here, "mobilenet_v2_bn.onnx"))
    args = ap.parse_args()
    torch.manual_seed(20251203)
    model = torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.randn(1, 3, 64, 64)
    # TrainingMode.PRESERVE on a model in eval mode exports inference
    # BatchNormalization nodes, and without constant folding the exporter
    # does not fold them into the Convs.
    torch.onnx.export(model, (x,), args.out, opset_version=13, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    print(f"{args.out}: {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
