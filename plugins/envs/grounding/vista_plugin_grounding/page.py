"""Seeded synthetic screens: an application window (GUI grounding) and a shop page (web actions).

Every widget records its kind, label and pixel box, so the envs know the ground truth exactly.
Text is drawn with Pillow's bundled font at 11-13 px: legible at full size, which is what a
ScreenSpot screenshot looks like to a model (small targets in a large screen); zooming helps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from PIL import Image, ImageDraw, ImageFont
from vista_plugin_scenekit.shapes import COLOURS, draw_shape

WidgetKind = Literal["button", "menu", "icon", "field", "checkbox", "link", "tab"]
MENUS = ("File", "Edit", "View", "Insert", "Format", "Tools", "Window", "Help")
BUTTONS = ("Save", "Cancel", "Apply", "Submit", "Export", "Import", "Delete", "Share", "Upload", "Refresh",
           "Print", "Search", "Reset", "Next", "Back", "Done")
FIELDS = ("Name", "Email", "Phone", "City", "Address", "Company", "Username", "Password", "Title", "Tags")
CHECKS = ("Remember me", "Dark mode", "Notifications", "Auto-save", "Show grid", "Send reports", "Sync files")
TABS = ("General", "Account", "Privacy", "Display", "Sound", "Network", "Storage", "About")
ICON_SHAPES = ("circle", "square", "triangle", "diamond", "star")
ICON_COLOURS = ("red", "green", "blue", "orange", "purple", "black")
PRODUCTS = ("Desk Lamp", "Coffee Mug", "Backpack", "Headphones", "Notebook", "Water Bottle", "Phone Case",
            "Umbrella", "Sunglasses", "Wall Clock", "Plant Pot", "Keyboard")


@dataclass
class Widget:
    kind: WidgetKind
    label: str
    box: tuple[int, int, int, int]
    id: int = -1
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def centre(self) -> tuple[int, int]:
        return (self.box[0] + self.box[2]) // 2, (self.box[1] + self.box[3]) // 2

    def describe(self) -> str:
        """How an instruction names this widget (ScreenSpot-style: what to click, not where)."""
        if self.kind == "icon":
            return f"the {self.label} icon in the toolbar"
        if self.kind == "field":
            return f"the {self.label} text field"
        if self.kind == "checkbox":
            return f"the '{self.label}' checkbox"
        if self.kind == "menu":
            return f"the {self.label} menu"
        if self.kind == "tab":
            return f"the {self.label} tab"
        return f"the {self.label} button"


@dataclass
class Screen:
    image: Image.Image
    widgets: list[Widget]


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _bbox(draw: ImageDraw.ImageDraw, text: str, font: ImageFont.FreeTypeFont | ImageFont.ImageFont) -> tuple[int, int, int, int]:
    """Text extent in whole pixels (widget boxes are integer pixel boxes)."""
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    return int(left), int(top), int(round(right)), int(round(bottom))


def _text(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill: str = "black") -> tuple[int, int]:
    font = _font(size)
    left, top, right, bottom = _bbox(draw, text, font)
    draw.text((xy[0] - left, xy[1] - top), text, fill=fill, font=font)
    return right - left, bottom - top


def _button(draw: ImageDraw.ImageDraw, x: int, y: int, label: str, size: int, fill: str = "#e8e8e8") -> tuple[int, int, int, int]:
    font = _font(size)
    left, top, right, bottom = _bbox(draw, label, font)
    w, h = right - left + 16, bottom - top + 10
    draw.rounded_rectangle((x, y, x + w, y + h), radius=4, fill=fill, outline="#888888")
    draw.text((x + 8 - left, y + 5 - top), label, fill="black", font=font)
    return x, y, x + w, y + h


def app_window(seed: int, width: int = 960, height: int = 600) -> Screen:
    """A settings-style application window: title bar, menus, icon toolbar, tabs, a form with text
    fields and checkboxes, and action buttons.  Labels are unique within a screen."""
    rng = random.Random(seed)
    font_size = rng.randint(11, 13)
    image = Image.new("RGB", (width, height), (246, 246, 248))
    draw = ImageDraw.Draw(image)
    widgets: list[Widget] = []
    draw.rectangle((0, 0, width, 28), fill=(220, 222, 228))
    _text(draw, (width // 2 - 40, 8), rng.choice(("Preferences", "Settings", "Editor", "Project")), font_size)
    for k, colour in enumerate(("#ff5f57", "#febc2e", "#28c840")):
        draw.ellipse((10 + 20 * k, 8, 22 + 20 * k, 20), fill=colour)
    # menus
    x = 10
    for label in rng.sample(MENUS, rng.randint(4, 6)):
        w, h = _text(draw, (x, 36), label, font_size)
        widgets.append(Widget("menu", label, (x - 3, 33, x + w + 3, 36 + h + 4)))
        x += w + 22
    # toolbar icons
    draw.line((0, 58, width, 58), fill="#cccccc")
    pairs = rng.sample([(c, s) for c in ICON_COLOURS for s in ICON_SHAPES], rng.randint(4, 7))
    x = 10
    for colour, shape in pairs:
        box = (x, 64, x + 20, 84)
        draw_shape(draw, shape, box, COLOURS[colour])
        widgets.append(Widget("icon", f"{colour} {shape}", box))
        x += 34
    draw.line((0, 92, width, 92), fill="#cccccc")
    # tabs
    x = 10
    for label in rng.sample(TABS, rng.randint(3, 5)):
        box = _button(draw, x, 100, label, font_size, fill="#dde6f5")
        widgets.append(Widget("tab", label, box))
        x = box[2] + 6
    # form: fields and checkboxes in two columns
    fields = rng.sample(FIELDS, rng.randint(3, 5))
    checks = rng.sample(CHECKS, rng.randint(2, 4))
    column_x = rng.choice((30, 60))
    y = 150
    for label in fields:
        w, _ = _text(draw, (column_x, y + 4), label + ":", font_size)
        box = (column_x + 110, y, column_x + 110 + rng.randint(160, 260), y + 22)
        draw.rectangle(box, fill="white", outline="#999999")
        widgets.append(Widget("field", label, box))
        y += 36
    cx, y = width // 2 + rng.randint(20, 80), 150
    for label in checks:
        box = (cx, y + 2, cx + 14, y + 16)
        draw.rectangle(box, fill="white", outline="#555555")
        if rng.random() < 0.4:
            draw.line((box[0] + 3, box[1] + 7, box[0] + 6, box[3] - 3, box[2] - 3, box[1] + 3), fill="black", width=2)
        tw, th = _text(draw, (cx + 22, y + 3), label, font_size)
        widgets.append(Widget("checkbox", label, (cx, y + 1, cx + 22 + tw, y + 17)))
        y += 30
    # buttons along the bottom
    x = width - 20
    for label in rng.sample(BUTTONS, rng.randint(3, 5)):
        font = _font(font_size)
        left, _, right, _ = _bbox(draw, label, font)
        x -= right - left + 16
        box = _button(draw, x, height - 46, label, font_size, fill="#4a7fd6" if label in ("Save", "Submit") else "#e8e8e8")
        widgets.append(Widget("button", label, box))
        x -= 12
    return Screen(image, widgets)


def shop_page(seed: int, width: int = 960, height: int = 600, cards: int = 6, marks: bool = True) -> Screen:
    """A shop page with product cards (name, price, "Add to cart", "Details") and a search bar.
    With ``marks`` every interactive element carries a set-of-marks id tag ``[n]`` (VisualWebArena
    style), which is what ``click [n]`` refers to."""
    rng = random.Random(seed)
    font_size = 12
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    widgets: list[Widget] = []
    draw.rectangle((0, 0, width, 44), fill=(40, 52, 72))
    _text(draw, (14, 14), "ShopMart", 16, fill="white")
    search = (160, 10, 520, 34)
    draw.rectangle(search, fill="white")
    widgets.append(Widget("field", "Search", search))
    cart = _button(draw, width - 90, 10, "Cart", font_size)
    widgets.append(Widget("button", "Cart", cart))
    names = rng.sample(PRODUCTS, cards)
    prices = rng.sample(range(5, 200), cards)
    columns = 3
    card_w, card_h = (width - 40) // columns - 16, 220
    for index, (name, price) in enumerate(zip(names, prices, strict=True)):
        col, row = index % columns, index // columns
        x, y = 20 + col * (card_w + 16), 64 + row * (card_h + 16)
        draw.rectangle((x, y, x + card_w, y + card_h), outline="#cccccc")
        colour = rng.choice(ICON_COLOURS)
        draw_shape(draw, rng.choice(ICON_SHAPES), (x + card_w // 2 - 30, y + 14, x + card_w // 2 + 30, y + 74),
                   COLOURS[colour])
        tw, th = _text(draw, (x + 12, y + 90), name, 13)
        widgets.append(Widget("link", name, (x + 10, y + 88, x + 14 + tw, y + 92 + th), extra={"price": price}))
        _text(draw, (x + 12, y + 114), f"${price}.00", 13, fill="#b12704")
        add = _button(draw, x + 12, y + 150, "Add to cart", font_size, fill="#ffd814")
        widgets.append(Widget("button", "Add to cart", add, extra={"product": name, "price": price}))
        details = _button(draw, add[2] + 10, y + 150, "Details", font_size)
        widgets.append(Widget("button", "Details", details, extra={"product": name, "price": price}))
    order = list(range(len(widgets)))
    rng.shuffle(order)
    for new_id, index in enumerate(order):
        widgets[index].id = new_id + 1
    if marks:
        for widget in widgets:
            tag = f"[{widget.id}]"
            font = _font(10)
            left, top, right, bottom = _bbox(draw, tag, font)
            x, y = widget.box[0], max(0, widget.box[1] - (bottom - top) - 4)
            draw.rectangle((x, y, x + right - left + 4, y + bottom - top + 4), fill=(200, 30, 30))
            draw.text((x + 2 - left, y + 2 - top), tag, fill="white", font=font)
    return Screen(image, widgets)
