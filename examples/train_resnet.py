"""torchvision ResNet-18 on random data: plan one training step under a memory budget with remat,
check that loss and gradients equal plain PyTorch, and compare peak memory and step time.

    ./scripts/python examples/train_resnet.py --budgets 100%,50%,25%
"""

import torch
import torch.nn.functional as F
import torchvision

from remat_report import parse_args, run


def make(batch_size, image_size=128, num_classes=1000):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=num_classes)
    x = torch.randn(batch_size, 3, image_size, image_size)
    y = torch.randint(0, num_classes, (batch_size,))
    return model, (x, y), F.cross_entropy


def main():
    args = parse_args(__doc__.splitlines()[0], {"batch": 32, "image_size": 128, "num_classes": 100})
    model, batch, loss_fn = make(args.batch, args.image_size, args.num_classes)
    run(f"ResNet-18, batch {args.batch}x3x{args.image_size}x{args.image_size}", model, batch,
        loss_fn, args)


if __name__ == "__main__":
    main()
